import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * A broker killed with SIGKILL while delayed messages are pending: 30
 * messages at delay level 3 (10 s) are sent, the command in
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
        // A plain message first, synchronously: the producer has the route
        // (sendOK copes with a client that just started) before the
        // asynchronous sends, which report a missing route only as failed.
        Ctx.sendOK(p, Ctx.message(topic, "TagK", "kill-route", "route"));
        // Sent asynchronously, as in the client's AsyncProducer example: 30
        // synchronous sends, each waiting for its fsync, took over 10 s on a
        // loaded machine, and all must be sent before the first is due.
        Map<String, Long> due = new ConcurrentHashMap<>();
        List<String> errors = new CopyOnWriteArrayList<>();
        CountDownLatch acked = new CountDownLatch(N);
        for (int i = 0; i < N; i++) {
            Message m = Ctx.message(topic, "TagK", "kill-" + i, "survive #" + i);
            m.setDelayTimeLevel(3);
            long at = System.currentTimeMillis() + DelayCase.LEVEL_MS[3];
            p.send(m, new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        due.put(r.getMsgId(), at);
                    } else {
                        errors.add(String.valueOf(r.getSendStatus()));
                    }
                    acked.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    errors.add(String.valueOf(e));
                    acked.countDown();
                }
            });
        }
        if (!acked.await(30, TimeUnit.SECONDS) || !errors.isEmpty()) {
            throw Ctx.fail("%d of %d sends answered in 30 s; errors: %s", N - acked.getCount(), N, errors);
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
        c.log("after the restart: %d of %d arrived, lateness %s", DelayCase.count(probe, due.keySet()), N,
            Ctx.stats(late));
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
    }
}
