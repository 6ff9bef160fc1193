import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Transactions, as in the client's transaction example: a
 * TransactionMQProducer sends three half messages; its local transaction
 * commits the first, rolls the second back and leaves the third UNKNOW, so
 * the broker must ask the producer back (checkLocalTransaction), which then
 * commits it. A push consumer gets the committed one, and the third only
 * after the check; the rolled-back one never (checked when a plain message
 * sent after everything has arrived too).
 */
public final class TransactionCase implements Compat.Case {
    @Override
    public long timeoutMillis() {
        return 150_000;
    }

    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        Map<String, Long> checkedAt = new ConcurrentHashMap<>();
        TransactionMQProducer p = new TransactionMQProducer(c.name("p"));
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                switch (msg.getKeys()) {
                    case "tx-commit":
                        return LocalTransactionState.COMMIT_MESSAGE;
                    case "tx-rollback":
                        return LocalTransactionState.ROLLBACK_MESSAGE;
                    default:
                        return LocalTransactionState.UNKNOW;
                }
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checkedAt.putIfAbsent(msg.getKeys(), System.currentTimeMillis());
                if ("tx-rollback".equals(msg.getKeys())) {
                    return LocalTransactionState.ROLLBACK_MESSAGE;
                }
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        c.start(p);
        Probe probe = new Probe();
        DefaultMQPushConsumer consumer = c.consumer("g", topic, "*", probe, null);
        c.ready(p, topic, consumer, probe);

        Map<String, String> idOf = new ConcurrentHashMap<>();
        for (String key : new String[] {"tx-commit", "tx-rollback", "tx-unknown"}) {
            Message m = Ctx.message(topic, "TagX", key, "transaction " + key);
            TransactionSendResult r = p.sendMessageInTransaction(m, null);
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                throw Ctx.fail("half message %s answered %s", key, r.getSendStatus());
            }
            idOf.put(key, r.getMsgId());
        }
        List<String> problems = new ArrayList<>();
        if (!probe.await(List.of(idOf.get("tx-commit")), 30_000)) {
            problems.add("the committed message did not arrive in 30 s");
        }
        if (!probe.await(List.of(idOf.get("tx-unknown")), 100_000)) {
            problems.add("the message left UNKNOW did not arrive in 100 s (check back "
                + (checkedAt.containsKey("tx-unknown") ? "came" : "never came") + ")");
        } else if (!checkedAt.containsKey("tx-unknown")) {
            problems.add("the message left UNKNOW arrived without a check back to the producer");
        } else {
            long at = probe.arrivals(idOf.get("tx-unknown")).get(0).at;
            if (at < checkedAt.get("tx-unknown")) {
                problems.add("the message left UNKNOW arrived before the producer was asked");
            }
            c.log("the broker checked back the UNKNOW transaction; it arrived %d ms after the check",
                at - checkedAt.get("tx-unknown"));
        }
        String fence = Ctx.sendOK(p, Ctx.message(topic, "TagX", "tx-fence", "after all")).getMsgId();
        if (!probe.await(List.of(fence), 30_000)) {
            problems.add("a plain message sent last did not arrive in 30 s");
        }
        if (!probe.arrivals(idOf.get("tx-rollback")).isEmpty()) {
            problems.add("the rolled-back message was delivered");
        }
        if (checkedAt.containsKey("tx-commit")) {
            problems.add("the broker checked back a transaction that had been committed");
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
    }
}
