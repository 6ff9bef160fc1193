import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * An orderly consumer's message past its maximum reconsume times goes to
 * the dead letters. A MessageListenerOrderly answers
 * SUSPEND_CURRENT_QUEUE_A_MOMENT to one message each time; with
 * setMaxReconsumeTimes(1) the client consumes it twice, in place, then
 * sends it to %RETRY%group as a normal message carrying its reconsume
 * count, which the broker must dead-letter (RocketMQ's rule: a count at the
 * maximum goes to %DLQ%group). A consumer of %DLQ%group then gets it with
 * the same ID, body, tag, keys and user property, and the orderly consumer
 * never gets it a third time.
 */
public final class OrderlyDeadCase implements Compat.Case {
    @Override
    public long timeoutMillis() {
        return 150_000;
    }

    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        String group = c.name("g");
        DefaultMQProducer p = c.producer("p", null);
        Probe probe = new Probe();
        MessageListenerOrderly listener = (msgs, context) -> {
            probe.consumeMessage(msgs, null);
            for (MessageExt m : msgs) {
                if ("dead-me".equals(m.getKeys())) {
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
            }
            return ConsumeOrderlyStatus.SUCCESS;
        };
        DefaultMQPushConsumer consumer = c.consumer("g", topic, "*", listener, null);
        consumer.setMaxReconsumeTimes(1);
        consumer.setSuspendCurrentQueueTimeMillis(200);
        consumer.setConsumeMessageBatchMaxSize(1);
        c.ready(p, topic, consumer, probe);

        Message sent = Ctx.message(topic, "TagD", "dead-me", "dead after one retry in place");
        String id = Ctx.sendOK(p, sent).getMsgId();
        if (!probe.awaitTimes(id, 2, 30_000)) {
            throw Ctx.fail("the message was consumed %d times in 30 s, want 2 (first and one in place)",
                probe.arrivals(id).size());
        }
        String dlq = "%DLQ%" + group;
        String unreadable = RetryCase.awaitReadable(c, dlq);
        if (unreadable != null) {
            throw Ctx.fail("%s (the client sent it back at its maximum of 1)", unreadable);
        }
        Probe dead = new Probe();
        DefaultMQPushConsumer dlqConsumer = c.consumer("dlq", dlq, "*", dead, null);
        dlqConsumer.start();
        if (!dead.await(List.of(id), 30_000)) {
            throw Ctx.fail("the message did not arrive in %s in 30 s", dlq);
        }
        MessageExt m = dead.arrivals(id).get(0).msg;
        String diff = Ctx.roundTrip(sent, m);
        if (diff != null) {
            throw Ctx.fail("the dead letter changed: %s", diff);
        }
        if (probe.arrivals(id).size() != 2) {
            throw Ctx.fail("the orderly consumer got the message %d times, want 2", probe.arrivals(id).size());
        }
        c.log("dead letter in %s after 2 orderly deliveries: id %s", dlq, m.getMsgId());
    }
}
