import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Delay levels measured at push consumers with the official remoting Java
 * client, unchanged, the same program against hourglass's remoting listener
 * and against Apache RocketMQ's name server, so that the two compare on one
 * footing (scripts/bench-rocketmq-remoting.sh runs both in one run). Writes
 * one run's report as JSON in the schema of internal/rmqbench, whose
 * -summarize makes the median-and-range table.
 *
 * Two phases, each on a topic of its own with a fresh group whose push
 * consumer is receiving (it got a plain message) before the first send:
 *
 * spread: WARMUP plain messages, received and not measured, then N
 *   messages at delay levels 1 to 4 in turn (1 s, 5 s, 10 s, 30 s);
 * herd: N messages at delay level HERD_LEVEL (10 s by default: the sends
 *   end before the first is due);
 * paced: N messages at delay levels 1 to 4 in turn, as in spread, but
 *   sent at PACED_RATE a second (1,000 by default: 20 s for 20,000), as
 *   a producer that is not itself the bottleneck sends; the spread's
 *   senders run as fast as the broker answers and, on a machine shared
 *   with the broker and the consumer, take the CPU the consumer needs,
 *   so its lateness is the client's as much as the broker's. 0 skips it.
 *
 * A level's delay counts from when the broker stored the message, which the
 * client sees only as somewhere between the start of its send and the
 * answer. So lateness (the listener's time of the first delivery - due) is
 * reported three times: with due = the time just before the send + the
 * delay (lateness_ms, an upper bound, which the summary table shows;
 * "early", arrived before that, is certain), with due = the time the answer
 * came + the delay (lateness_from_ack_ms, a lower bound), and with due = the
 * broker's own store time + the delay (lateness_from_store_ms, the
 * definition). The store time is the storeTimestamp of the message the
 * send's offset message ID names, read back with the client's viewMessage
 * once the phase is over: at RocketMQ that is the stored copy under
 * SCHEDULE_TOPIC_XXXX, whose storeTimestamp its schedule counts the delay
 * from; the message a push consumer gets is a copy stored again when the
 * delay ended, and its storeTimestamp is that later time
 * (from_pushed_store_ms: arrival - the pushed message's storeTimestamp). The herd's first and last
 * arrival are counted from the first and the last due time (upper bound). Senders are SENDERS threads sharing PRODUCERS producers,
 * synchronous sends; the send rate is acknowledged sends per second from the
 * first send to the last acknowledgement.
 *
 * Usage: java Bench NAMESRV SYSTEM FLUSH RUN TOPIC_PREFIX JSON_OUT
 * (system properties bench.n, bench.warmup, bench.herdLevel, bench.senders,
 * bench.producers, bench.grace.ms, bench.viewers, bench.pacedRate)
 */
public final class Bench {
    static final long[] LEVEL_MS = {0, 1_000, 5_000, 10_000, 30_000, 60_000, 120_000};
    static final int N = Integer.getInteger("bench.n", 20_000);
    static final int WARMUP = Integer.getInteger("bench.warmup", 2_000);
    static final int HERD_LEVEL = Integer.getInteger("bench.herdLevel", 3);
    static final int SENDERS = Integer.getInteger("bench.senders", 32);
    static final int PRODUCERS = Integer.getInteger("bench.producers", 4);
    static final long GRACE_MS = Long.getLong("bench.grace.ms", 30_000);
    static final int VIEWERS = Integer.getInteger("bench.viewers", 8);
    static final int SIZE = 256;
    static final int PACED_RATE = Integer.getInteger("bench.pacedRate", 1_000);

    public static void main(String[] a) throws Exception {
        if (a.length != 6) {
            System.err.println("usage: Bench NAMESRV SYSTEM FLUSH RUN TOPIC_PREFIX JSON_OUT");
            System.exit(2);
        }
        String namesrv = a[0], system = a[1], flush = a[2], prefix = a[4];
        int run = Integer.parseInt(a[3]);
        String started = Instant.now().toString();
        String spread = phase(namesrv, system, prefix + "_spread", false, 0);
        String herd = phase(namesrv, system, prefix + "_herd", true, 0);
        String paced = PACED_RATE > 0 ? phase(namesrv, system, prefix + "_paced", false, PACED_RATE) : null;
        String json = String.format(Locale.ROOT,
            "{\"system\":\"%s\",\"flush\":\"%s\",\"endpoint\":\"%s\",\"tls\":false,\"run\":%d,\"n\":%d,\"size\":%d,"
                + "\"spread_s\":0,\"producers\":%d,\"senders\":%d,\"receivers\":1,\"started\":\"%s\","
                + "\"spread\":%s,\"herd\":%s%s}\n",
            system, flush, namesrv, run, N, SIZE, PRODUCERS, SENDERS, started, spread, herd,
            paced == null ? "" : String.format(Locale.ROOT, ",\"paced_rate\":%d,\"paced\":%s", PACED_RATE, paced));
        Files.writeString(Path.of(a[5]), json);
        Runtime.getRuntime().halt(0);
    }

    /** Runs one phase and returns its JSON object; rate > 0 paces its sends. */
    static String phase(String namesrv, String system, String topic, boolean herd, int rate) throws Exception {
        String group = topic + "_g";
        long nonce = ThreadLocalRandom.current().nextLong();
        Collector col = new Collector(nonce, N);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setMqClientApiTimeout(10_000);
        consumer.setInstanceName(group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = nowMicros();
            for (MessageExt m : msgs) {
                col.add(m.getBody(), now, m.getStoreTimestamp());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        DefaultMQProducer[] producers = new DefaultMQProducer[PRODUCERS];
        for (int i = 0; i < PRODUCERS; i++) {
            producers[i] = new DefaultMQProducer(topic + "_p");
            producers[i].setNamesrvAddr(namesrv);
            producers[i].setInstanceName(topic + "_p" + i);
            producers[i].setSendMsgTimeout(10_000);
            producers[i].setMqClientApiTimeout(10_000);
            producers[i].start();
        }
        // The topic exists before the consumer asks for its route; the
        // consumer has its queues once it got this first message.
        producers[0].send(new Message(topic, body((byte) 'r', nonce, 0, 0)));
        consumer.start();
        if (!col.awaitReady(60_000)) {
            throw new IllegalStateException(system + ": the push consumer got nothing in 60 s");
        }
        Load load = new Load();
        if (!herd && WARMUP > 0) {
            send(producers, topic, nonce, WARMUP, i -> 0, (byte) 'w', 0);
        }
        System.err.printf("%s %s: sending %d to %s%n", system, herd ? "herd" : rate > 0 ? "paced" : "spread", N, topic);
        Sends s = send(producers, topic, nonce, N, i -> herd ? HERD_LEVEL : 1 + i % 4, herd ? (byte) 'h' : (byte) 's', rate);
        long lastDue = Arrays.stream(s.dueMs).max().getAsLong();
        col.awaitAll(s.sent, lastDue + GRACE_MS);
        load.stop();
        viewStored(producers, s);
        consumer.shutdown();
        for (DefaultMQProducer p : producers) {
            p.shutdown();
        }
        return col.json(topic, group, s, herd, load);
    }

    interface LevelOf {
        int level(int i);
    }

    /** What the senders saw. */
    static final class Sends {
        final long[] dueMs;
        final boolean[] ok;
        final long[] latencyMicros;
        final long[] ackMs;
        final long[] beforeMs;
        final String[] offsetMsgId;
        final long[] storeMs;
        final AtomicInteger viewErrors = new AtomicInteger();
        final AtomicInteger errors = new AtomicInteger();
        final AtomicReference<String> firstError = new AtomicReference<>();
        int sent;
        long startMicros, endMicros;

        Sends(int n) {
            dueMs = new long[n];
            ok = new boolean[n];
            latencyMicros = new long[n];
            ackMs = new long[n];
            beforeMs = new long[n];
            offsetMsgId = new String[n];
            storeMs = new long[n];
        }
    }

    /**
     * Sends n messages from SENDERS threads; index i at levelOf(i) (0:
     * none); with rate > 0, not before i / rate seconds after the start.
     */
    static Sends send(DefaultMQProducer[] producers, String topic, long nonce, int n, LevelOf levelOf, byte phase,
            int rate) throws InterruptedException {
        Sends s = new Sends(n);
        AtomicInteger next = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(SENDERS);
        s.startMicros = nowMicros();
        for (int t = 0; t < SENDERS; t++) {
            DefaultMQProducer p = producers[t % producers.length];
            new Thread(() -> {
                try {
                    for (int i = next.getAndIncrement(); i < n; i = next.getAndIncrement()) {
                        if (rate > 0) {
                            long wait = s.startMicros + (long) i * 1_000_000L / rate - nowMicros();
                            if (wait > 0) {
                                LockSupport.parkNanos(wait * 1_000);
                            }
                        }
                        int level = levelOf.level(i);
                        long before = System.currentTimeMillis();
                        long due = before + LEVEL_MS[level];
                        Message m = new Message(topic, body(phase, nonce, i, due));
                        if (level > 0) {
                            m.setDelayTimeLevel(level);
                        }
                        long t0 = nowMicros();
                        try {
                            SendResult r = p.send(m);
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                s.ok[i] = true;
                                s.offsetMsgId[i] = r.getOffsetMsgId();
                            } else {
                                s.errors.incrementAndGet();
                            }
                        } catch (Exception e) {
                            s.errors.incrementAndGet();
                            s.firstError.compareAndSet(null, e.toString());
                        }
                        s.latencyMicros[i] = nowMicros() - t0;
                        s.ackMs[i] = System.currentTimeMillis();
                        s.dueMs[i] = due;
                        s.beforeMs[i] = before;
                    }
                } finally {
                    done.countDown();
                }
            }).start();
        }
        done.await();
        s.endMicros = nowMicros();
        for (boolean b : s.ok) {
            s.sent += b ? 1 : 0;
        }
        return s;
    }

    /**
     * Reads back each sent message's store time by its offset message ID,
     * from VIEWERS threads over the producers' connections.
     */
    static void viewStored(DefaultMQProducer[] producers, Sends s) throws InterruptedException {
        AtomicInteger next = new AtomicInteger();
        Thread[] ts = new Thread[VIEWERS];
        for (int t = 0; t < ts.length; t++) {
            DefaultMQProducer p = producers[t % producers.length];
            ts[t] = new Thread(() -> {
                for (int i = next.getAndIncrement(); i < s.ok.length; i = next.getAndIncrement()) {
                    if (!s.ok[i] || s.offsetMsgId[i] == null) {
                        continue;
                    }
                    try {
                        s.storeMs[i] = p.viewMessage(s.offsetMsgId[i]).getStoreTimestamp();
                    } catch (Exception e) {
                        s.viewErrors.incrementAndGet();
                    }
                }
            });
            ts[t].start();
        }
        for (Thread t : ts) {
            t.join();
        }
    }

    static byte[] body(byte phase, long nonce, int idx, long dueMs) {
        ByteBuffer b = ByteBuffer.allocate(SIZE);
        b.put("rmqbench".getBytes(StandardCharsets.US_ASCII)).put(phase).putLong(nonce).putInt(idx).putLong(dueMs);
        while (b.hasRemaining()) {
            b.put((byte) ('a' + b.position() % 26));
        }
        return b.array();
    }

    static long nowMicros() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1_000_000L + i.getNano() / 1_000;
    }

    /** The first arrival of each message of one phase. */
    static final class Collector {
        final long nonce;
        final long[] arrivedMicros, dueMs, pushedStoreMs;
        int received, dups, foreign, ready;

        Collector(long nonce, int n) {
            this.nonce = nonce;
            arrivedMicros = new long[n];
            dueMs = new long[n];
            pushedStoreMs = new long[n];
        }

        synchronized void add(byte[] body, long now, long storeMs) {
            ByteBuffer b = ByteBuffer.wrap(body);
            byte[] magic = new byte[8];
            if (body.length < 29) {
                foreign++;
                return;
            }
            b.get(magic);
            byte phase = b.get();
            long nonce = b.getLong();
            int idx = b.getInt();
            long due = b.getLong();
            if (!"rmqbench".equals(new String(magic, StandardCharsets.US_ASCII)) || nonce != this.nonce) {
                foreign++;
            } else if (phase == 'r') {
                ready++;
                notifyAll();
            } else if (phase == 'w') {
                return;
            } else if (idx >= arrivedMicros.length) {
                foreign++;
            } else if (arrivedMicros[idx] != 0) {
                dups++;
            } else {
                arrivedMicros[idx] = now;
                dueMs[idx] = due;
                pushedStoreMs[idx] = storeMs;
                received++;
                notifyAll();
            }
        }

        synchronized boolean awaitReady(long ms) throws InterruptedException {
            long until = System.currentTimeMillis() + ms;
            while (ready == 0 && System.currentTimeMillis() < until) {
                wait(100);
            }
            return ready > 0;
        }

        synchronized void awaitAll(int n, long untilMs) throws InterruptedException {
            while (received < n && System.currentTimeMillis() < untilMs) {
                wait(100);
            }
        }

        synchronized String json(String topic, String group, Sends s, boolean herd, Load load) {
            List<Double> late = new ArrayList<>(), lateAck = new ArrayList<>(), lateStore = new ArrayList<>();
            List<Double> afterPushedStore = new ArrayList<>();
            int early = 0, earlyStore = 0, lost = 0, sentLate = 0;
            long firstDue = Long.MAX_VALUE, lastDue = Long.MIN_VALUE;
            long firstArr = Long.MAX_VALUE, lastArr = Long.MIN_VALUE;
            for (int i = 0; i < arrivedMicros.length; i++) {
                if (!s.ok[i]) {
                    continue;
                }
                firstDue = Math.min(firstDue, s.dueMs[i]);
                lastDue = Math.max(lastDue, s.dueMs[i]);
                if (arrivedMicros[i] == 0) {
                    lost++;
                    continue;
                }
                double l = arrivedMicros[i] / 1000.0 - dueMs[i];
                late.add(l);
                long delay = dueMs[i] - s.beforeMs[i];
                lateAck.add(arrivedMicros[i] / 1000.0 - (s.ackMs[i] + delay));
                if (s.storeMs[i] != 0) {
                    double ls = arrivedMicros[i] / 1000.0 - (s.storeMs[i] + delay);
                    lateStore.add(ls);
                    earlyStore += ls < 0 ? 1 : 0;
                }
                afterPushedStore.add(arrivedMicros[i] / 1000.0 - pushedStoreMs[i]);
                early += l < 0 ? 1 : 0;
                firstArr = Math.min(firstArr, arrivedMicros[i]);
                lastArr = Math.max(lastArr, arrivedMicros[i]);
            }
            List<Double> lat = new ArrayList<>();
            for (int i = 0; i < s.latencyMicros.length; i++) {
                if (s.ok[i]) {
                    lat.add(s.latencyMicros[i] / 1000.0);
                    sentLate += s.ackMs[i] > s.dueMs[i] ? 1 : 0;
                }
            }
            double sendSec = (s.endMicros - s.startMicros) / 1e6;
            StringBuilder j = new StringBuilder("{");
            j.append(String.format(Locale.ROOT,
                "\"topic\":\"%s\",\"group\":\"%s\",\"lead_s\":0,\"sent\":%d,\"send_errors\":%d,", topic, group, s.sent,
                s.errors.get()));
            if (s.firstError.get() != null) {
                j.append("\"first_send_error\":\"").append(s.firstError.get().replace("\\", "/").replace("\"", "'")
                    .replace("\n", " ")).append("\",");
            }
            j.append(String.format(Locale.ROOT,
                "\"sent_late\":%d,\"send_s\":%.3f,\"send_rate\":%.1f,\"send_latency_ms\":%s,\"received\":%d,\"lost\":%d,"
                    + "\"early\":%d,\"duplicates\":%d,\"foreign\":%d,\"receive_errors\":0,\"ack_errors\":0,"
                    + "\"lateness_ms\":%s,\"lateness_from_ack_ms\":%s,\"lateness_from_store_ms\":%s,"
                    + "\"from_pushed_store_ms\":%s,\"view_errors\":%d,\"early_from_store\":%d,",
                sentLate, sendSec, s.sent / sendSec, stats(lat), received, lost, early, dups, foreign, stats(late),
                stats(lateAck), stats(lateStore), stats(afterPushedStore), s.viewErrors.get(), earlyStore));
            if (herd && !late.isEmpty()) {
                j.append(String.format(Locale.ROOT, "\"herd_first_ms\":%.1f,\"herd_last_ms\":%.1f,",
                    firstArr / 1000.0 - firstDue, lastArr / 1000.0 - lastDue));
            }
            j.append("\"load\":").append(load.json()).append('}');
            return j.toString();
        }
    }

    /** The JSON of internal/loadtest.Lateness for xs (milliseconds). */
    static String stats(List<Double> xs) {
        if (xs.isEmpty()) {
            return "{\"count\":0,\"min_ms\":0,\"mean_ms\":0,\"p50_ms\":0,\"p95_ms\":0,\"p99_ms\":0,\"p99_9_ms\":0,\"max_ms\":0}";
        }
        double[] v = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        double sum = 0;
        for (double x : v) {
            sum += x;
        }
        return String.format(Locale.ROOT,
            "{\"count\":%d,\"min_ms\":%.3f,\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p95_ms\":%.3f,\"p99_ms\":%.3f,"
                + "\"p99_9_ms\":%.3f,\"max_ms\":%.3f}",
            v.length, v[0], sum / v.length, rank(v, 50), rank(v, 95), rank(v, 99), rank(v, 99.9), v[v.length - 1]);
    }

    /** The nearest-rank q-th percentile of sorted v. */
    static double rank(double[] v, double q) {
        int r = (int) Math.ceil(q / 100 * v.length);
        return v[Math.max(0, Math.min(v.length, r) - 1)];
    }

    /** The 1-minute load average, sampled every 2 s while a phase runs. */
    static final class Load {
        final List<Double> samples = new ArrayList<>();
        final Thread t;
        volatile boolean stop;

        Load() {
            sample();
            t = new Thread(() -> {
                while (!stop) {
                    try {
                        Thread.sleep(2_000);
                    } catch (InterruptedException e) {
                        return;
                    }
                    sample();
                }
            });
            t.setDaemon(true);
            t.start();
        }

        synchronized void sample() {
            try {
                samples.add(Double.parseDouble(Files.readString(Path.of("/proc/loadavg")).split(" ")[0]));
            } catch (IOException | RuntimeException e) {
                // no load average on this system: the report says 0
            }
        }

        void stop() {
            stop = true;
            sample();
        }

        synchronized String json() {
            if (samples.isEmpty()) {
                return "{\"start\":0,\"end\":0,\"mean\":0,\"max\":0}";
            }
            double sum = 0, max = 0;
            for (double x : samples) {
                sum += x;
                max = Math.max(max, x);
            }
            return String.format(Locale.ROOT, "{\"start\":%.2f,\"end\":%.2f,\"mean\":%.2f,\"max\":%.2f}",
                samples.get(0), samples.get(samples.size() - 1), sum / samples.size(), max);
        }
    }
}
