import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;

/**
 * SQL92 filtering is refused clearly: a push consumer subscribed with
 * MessageSelector.bySql does not start, and the reason names SQL92 (the
 * client checks a subscription that is not by TAG with the broker as it
 * starts; Apache RocketMQ refuses it too unless property filtering is on,
 * which it is not by default).
 */
public final class SqlRefusedCase implements Compat.Case {
    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", null);
        Ctx.sendOK(p, Ctx.message(topic, "TagS", c.name("first"), "makes the topic"));
        DefaultMQPushConsumer sql = new DefaultMQPushConsumer(c.name("sql"));
        sql.setNamesrvAddr(c.namesrv);
        sql.setMqClientApiTimeout(10_000);
        sql.setInstanceName(c.name + "-sql");
        sql.subscribe(topic, MessageSelector.bySql("a > 1"));
        sql.registerMessageListener((MessageListenerConcurrently) (msgs, context) ->
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        c.onClose(sql::shutdown);
        Exception refused = null;
        try {
            sql.start();
        } catch (Exception e) {
            refused = e;
        }
        if (refused == null) {
            throw Ctx.fail("a consumer subscribed by SQL92 started");
        }
        if (!String.valueOf(refused.getMessage()).contains("SQL92")) {
            throw Ctx.fail("the SQL92 consumer's start failed without naming SQL92: %s", QueryCase.firstLine(refused));
        }
        c.log("the SQL92 consumer did not start: %s", QueryCase.firstLine(refused));
    }
}
