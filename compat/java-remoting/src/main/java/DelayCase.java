import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Delay levels, as RocketMQ 4.x users set them: messages with
 * setDelayTimeLevel(1..3) (1 s, 5 s and 10 s in the default table of both
 * brokers) to a push consumer. Each arrives exactly once, never before its
 * level's delay counted from before the send, with the message ID the send
 * returned and its body, tag, keys and user property, and carries the DELAY
 * property. Prints the lateness per level.
 */
public final class DelayCase implements Compat.Case {
    static final long[] LEVEL_MS = {0, 1_000, 5_000, 10_000, 30_000};

    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", null);
        Probe probe = new Probe();
        DefaultMQPushConsumer consumer = c.consumer("g", topic, "*", probe, null);
        c.ready(p, topic, consumer, probe);

        Map<String, Long> due = new LinkedHashMap<>();
        Map<String, Message> sent = new LinkedHashMap<>();
        Map<String, Integer> levelOf = new LinkedHashMap<>();
        for (int i = 0; i < 2; i++) {
            for (int level = 3; level >= 1; level--) {
                Message m = Ctx.message(topic, "TagL" + level, "delay-" + level + "-" + i, "level " + level + " #" + i);
                m.setDelayTimeLevel(level);
                long before = System.currentTimeMillis();
                String id = Ctx.sendOK(p, m).getMsgId();
                due.put(id, before + LEVEL_MS[level]);
                sent.put(id, m);
                levelOf.put(id, level);
            }
        }
        if (!probe.await(due.keySet(), 40_000)) {
            throw Ctx.fail("%d of %d level messages arrived in 40 s", count(probe, due.keySet()), due.size());
        }
        List<String> problems = new ArrayList<>();
        Map<Integer, List<Long>> late = new LinkedHashMap<>();
        for (String id : due.keySet()) {
            List<Probe.Arrival> a = probe.arrivals(id);
            Probe.Arrival first = a.get(0);
            int level = levelOf.get(id);
            if (a.size() != 1) {
                problems.add(id + " arrived " + a.size() + " times");
            }
            if (first.at < due.get(id)) {
                problems.add(String.format("%s (level %d) arrived %d ms early", id, level, due.get(id) - first.at));
            }
            late.computeIfAbsent(level, k -> new ArrayList<>()).add(first.at - due.get(id));
            String diff = Ctx.roundTrip(sent.get(id), first.msg);
            if (diff != null) {
                problems.add(id + " changed: " + diff);
            }
            MessageExt got = first.msg;
            if (!String.valueOf(level).equals(got.getProperty("DELAY"))) {
                problems.add(id + " carries DELAY=" + got.getProperty("DELAY") + ", want " + level);
            }
            if (!topic.equals(got.getTopic())) {
                problems.add(id + " arrived on topic " + got.getTopic());
            }
        }
        for (Map.Entry<Integer, List<Long>> e : late.entrySet()) {
            c.log("level %d lateness: %s", e.getKey(), Ctx.stats(e.getValue()));
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
    }

    static long count(Probe probe, java.util.Collection<String> ids) {
        java.util.Set<String> seen = probe.ids();
        return ids.stream().filter(seen::contains).count();
    }
}
