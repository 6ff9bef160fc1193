import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;

/**
 * Broadcasting: two push consumers of one group in MessageModel.BROADCASTING
 * (offsets kept by the clients) each get every message, a delayed one
 * included, once and never early.
 */
public final class BroadcastCase implements Compat.Case {
    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", null);
        Probe a = new Probe(), b = new Probe();
        DefaultMQPushConsumer ca = c.consumer("g", topic, "*", a, null);
        DefaultMQPushConsumer cb = c.consumer("g", topic, "*", b, null);
        Models.broadcasting(ca);
        Models.broadcasting(cb);
        c.ready(p, topic, ca, a);
        cb.start();
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            ids.add(Ctx.sendOK(p, Ctx.message(topic, "TagB", "broadcast-" + i, "to all #" + i)).getMsgId());
        }
        org.apache.rocketmq.common.message.Message delayed = Ctx.message(topic, "TagB", "broadcast-delayed", "later");
        delayed.setDelayTimeLevel(1);
        long due = System.currentTimeMillis() + 1_000;
        String delayedId = Ctx.sendOK(p, delayed).getMsgId();
        ids.add(delayedId);
        List<String> problems = new ArrayList<>();
        for (Probe probe : new Probe[] {a, b}) {
            String who = probe == a ? "consumer A" : "consumer B";
            if (!probe.await(ids, 30_000)) {
                problems.add(String.format("%s got %d of %d messages in 30 s", who, DelayCase.count(probe, ids), ids.size()));
                continue;
            }
            for (String id : ids) {
                int n = probe.arrivals(id).size();
                if (n != 1) {
                    problems.add(String.format("%s got %s %d times", who, id, n));
                }
            }
            if (probe.arrivals(delayedId).get(0).at < due) {
                problems.add(who + " got the delayed message early");
            }
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
        c.log("both consumers got all %d messages", ids.size());
    }
}
