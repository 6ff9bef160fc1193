import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;

/**
 * A broker killed with SIGKILL while delayed messages are pending: 30
 * messages at delay level 3 (10 s: a loaded machine may take seconds for 30
 * synchronous sends) are sent, the command in
 * the system property compat.restart kills the broker and starts it again
 * before the first is due, and a push consumer then gets every one, none
 * early: 0 lost, 0 early. Run it alone: it takes the broker away from every
 * other client.
 */
public final class KillCase implements Compat.Case {
    static final int N = 30;

    @Override
    public long timeoutMillis() {
        return 150_000;
    }

    @Override
    public void run(Ctx c) throws Exception {
        String restart = System.getProperty("compat.restart");
        if (restart == null || restart.isEmpty()) {
            throw Ctx.fail("no restart command: set -Dcompat.restart");
        }
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", null);
        Map<String, Long> due = new LinkedHashMap<>();
        for (int i = 0; i < N; i++) {
            Message m = Ctx.message(topic, "TagK", "kill-" + i, "survive #" + i);
            m.setDelayTimeLevel(3);
            long before = System.currentTimeMillis();
            due.put(Ctx.sendOK(p, m).getMsgId(), before + DelayCase.LEVEL_MS[3]);
        }
        p.shutdown();
        long killedAt = System.currentTimeMillis();
        long first = due.values().stream().min(Long::compare).get();
        if (killedAt >= first) {
            throw Ctx.fail("the sends took so long that the first message was due before the kill");
        }
        Process proc = new ProcessBuilder("bash", "-c", restart).inheritIO().start();
        if (proc.waitFor() != 0) {
            throw Ctx.fail("the restart command exited %d", proc.exitValue());
        }
        c.log("killed with SIGKILL %d ms before the first message was due; up again after %d ms",
            first - killedAt, System.currentTimeMillis() - killedAt);

        Probe probe = new Probe();
        DefaultMQPushConsumer consumer = c.consumer("g", topic, "*", probe, null);
        consumer.start();
        if (!probe.await(due.keySet(), 90_000)) {
            throw Ctx.fail("lost: %d of %d messages arrived in 90 s after the restart",
                DelayCase.count(probe, due.keySet()), N);
        }
        List<String> problems = new ArrayList<>();
        List<Long> late = new ArrayList<>();
        for (Map.Entry<String, Long> e : due.entrySet()) {
            List<Probe.Arrival> a = probe.arrivals(e.getKey());
            if (a.size() != 1) {
                problems.add(e.getKey() + " arrived " + a.size() + " times");
            }
            long at = a.get(0).at;
            if (at < e.getValue()) {
                problems.add(String.format("%s arrived %d ms early", e.getKey(), e.getValue() - at));
            }
            late.add(at - e.getValue());
        }
        c.log("after the restart: %d of %d arrived, lateness %s", probe.distinct(), N, Ctx.stats(late));
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
    }
}
