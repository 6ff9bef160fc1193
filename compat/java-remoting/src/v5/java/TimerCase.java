import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;

/**
 * RocketMQ 5's timer properties, which only a 5.x client sets (this file is
 * compiled for 5.x only): setDeliverTimeMs (TIMER_DELIVER_MS),
 * setDelayTimeMs (TIMER_DELAY_MS) and setDelayTimeSec (TIMER_DELAY_SEC),
 * each to a push consumer, once, never before the time asked for, with what
 * was sent. Prints the lateness.
 */
public final class TimerCase implements Compat.Case {
    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", null);
        Probe probe = new Probe();
        DefaultMQPushConsumer consumer = c.consumer("g", topic, "*", probe, null);
        c.ready(p, topic, consumer, probe);

        Map<String, Long> due = new LinkedHashMap<>();
        Map<String, Message> sent = new LinkedHashMap<>();
        Map<String, String> kind = new LinkedHashMap<>();
        for (int i = 0; i < 2; i++) {
            long before = System.currentTimeMillis();
            Message m = Ctx.message(topic, "TagT", "timer-deliver-" + i, "deliver at #" + i);
            long at = before + 2_500 + i * 300;
            m.setDeliverTimeMs(at);
            put(due, sent, kind, Ctx.sendOK(p, m).getMsgId(), at, m, "setDeliverTimeMs");

            m = Ctx.message(topic, "TagT", "timer-delay-ms-" + i, "delay ms #" + i);
            before = System.currentTimeMillis();
            m.setDelayTimeMs(1_700 + i * 300);
            put(due, sent, kind, Ctx.sendOK(p, m).getMsgId(), before + 1_700 + i * 300, m, "setDelayTimeMs");

            m = Ctx.message(topic, "TagT", "timer-delay-sec-" + i, "delay sec #" + i);
            before = System.currentTimeMillis();
            m.setDelayTimeSec(2 + i);
            put(due, sent, kind, Ctx.sendOK(p, m).getMsgId(), before + (2 + i) * 1_000L, m, "setDelayTimeSec");
        }
        if (!probe.await(due.keySet(), 30_000)) {
            throw Ctx.fail("%d of %d timer messages arrived in 30 s", DelayCase.count(probe, due.keySet()), due.size());
        }
        List<String> problems = new ArrayList<>();
        Map<String, List<Long>> late = new LinkedHashMap<>();
        for (String id : due.keySet()) {
            List<Probe.Arrival> a = probe.arrivals(id);
            Probe.Arrival first = a.get(0);
            if (a.size() != 1) {
                problems.add(id + " arrived " + a.size() + " times");
            }
            if (first.at < due.get(id)) {
                problems.add(String.format("%s (%s) arrived %d ms early", id, kind.get(id), due.get(id) - first.at));
            }
            late.computeIfAbsent(kind.get(id), k -> new ArrayList<>()).add(first.at - due.get(id));
            String diff = Ctx.roundTrip(sent.get(id), first.msg);
            if (diff != null) {
                problems.add(id + " changed: " + diff);
            }
        }
        for (Map.Entry<String, List<Long>> e : late.entrySet()) {
            c.log("%s lateness: %s", e.getKey(), Ctx.stats(e.getValue()));
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
    }

    private static void put(Map<String, Long> due, Map<String, Message> sent, Map<String, String> kind,
            String id, long at, Message m, String how) {
        due.put(id, at);
        sent.put(id, m);
        kind.put(id, how);
    }
}
