import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import java.util.Locale;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.MessageListener;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.common.ClientErrorCode;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * What a case works with: unique topic and group names for this run (a
 * RocketMQ kept between runs must not hand a case an earlier run's
 * messages), clients set up as the client's own examples set them up and
 * shut down when the case ends, and the checks' shared vocabulary.
 */
public final class Ctx {
    final String name, namesrv, run;
    private final Deque<Runnable> closers = new ArrayDeque<>();

    Ctx(String name, String namesrv, String run) {
        this.name = name;
        this.namesrv = namesrv;
        this.run = run;
    }

    /** A topic or group name unique to this case and run (RocketMQ allows [A-Za-z0-9_-]). */
    String name(String what) {
        return "jr_" + name + "_" + what + "_" + run;
    }

    /** Prints one progress line, prefixed with the case's name. */
    void log(String fmt, Object... args) {
        System.out.println("[" + name + "] " + String.format(Locale.ROOT, fmt, args));
        System.out.flush();
    }

    /** A failure to throw: the case stops and its message is the reason. */
    static CaseFailure fail(String fmt, Object... args) {
        return new CaseFailure(String.format(Locale.ROOT, fmt, args));
    }

    /** A started producer of group name(what), shut down when the case ends. */
    DefaultMQProducer producer(String what, RPCHook hook) throws Exception {
        DefaultMQProducer p = hook == null ? new DefaultMQProducer(name(what)) : new DefaultMQProducer(name(what), hook);
        return start(p);
    }

    /** Starts a producer made by the case (a TransactionMQProducer, say) with this run's settings. */
    <P extends DefaultMQProducer> P start(P p) throws Exception {
        p.setNamesrvAddr(namesrv);
        // The defaults (3 s) cover a first call's connection set-up too,
        // which a JVM that just started on a loaded machine can exceed.
        p.setSendMsgTimeout(10_000);
        p.setMqClientApiTimeout(10_000);
        p.setInstanceName(name + "-" + p.getProducerGroup());
        p.start();
        closers.push(p::shutdown);
        return p;
    }

    /**
     * A push consumer of group name(group) on topic from its first offset,
     * not started, so the case can set more before start(); it is shut down
     * when the case ends.
     */
    DefaultMQPushConsumer consumer(String group, String topic, String expr, MessageListener l, RPCHook hook)
            throws Exception {
        DefaultMQPushConsumer c = hook == null ? new DefaultMQPushConsumer(name(group))
            : new DefaultMQPushConsumer(name(group), hook,
                new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        c.setNamesrvAddr(namesrv);
        c.setMqClientApiTimeout(10_000);
        c.setInstanceName(name + "-" + group + "-" + closers.size());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, expr);
        if (l instanceof MessageListenerOrderly) {
            c.registerMessageListener((MessageListenerOrderly) l);
        } else {
            c.registerMessageListener((MessageListenerConcurrently) l);
        }
        closers.push(c::shutdown);
        return c;
    }

    /**
     * Sends a plain message to topic and starts c, then waits until c got
     * it: from then on the consumer is subscribed, has its queues and pulls,
     * so what a case sends next is timed from a consumer that is ready (a
     * JVM client takes a while to start on a loaded machine). The topic
     * exists before the consumer asks for its route, as in the examples,
     * where the producer runs first.
     */
    void ready(DefaultMQProducer p, String topic, DefaultMQPushConsumer c, Probe probe) throws Exception {
        String id = sendOK(p, message(topic, "Ready", name("ready"), "ready")).getMsgId();
        c.start();
        if (!probe.await(List.of(id), 30_000)) {
            throw fail("consumer %s did not receive a plain message sent before it started in 30 s",
                c.getConsumerGroup());
        }
    }

    /** Registers something to shut down when the case ends (last first). */
    void onClose(Runnable r) {
        closers.push(r);
    }

    void closeAll() {
        while (!closers.isEmpty()) {
            try {
                closers.pop().run();
            } catch (RuntimeException e) {
                log("shutdown: %s", e);
            }
        }
    }

    /**
     * How many times a send answered "broker busy" (code 2) may be tried
     * again: the system property compat.busyRetries, 0 unless set. Apache
     * RocketMQ answers it on a loaded machine and the clients do not retry
     * it; runs against it set a few, runs against hourglass (which should
     * apply back-pressure rather than refuse) none.
     */
    static final int BUSY_RETRIES = Integer.getInteger("compat.busyRetries", 0);

    /**
     * Sends m and fails the case unless the broker answered SEND_OK. A send
     * whose client found no route is tried twice more: the client looks a
     * route up under a lock that its own periodic route refresh holds while
     * it waits for the name server, and gives up after 3 s, which a client
     * that just started on a loaded machine reaches (its log says "tryLock
     * timeout"); a broker that really has no route fails all three.
     */
    static SendResult sendOK(DefaultMQProducer p, Message m) throws Exception {
        return sendOK(m, () -> p.send(m));
    }

    /** One send of a message, however the case makes it (to a queue it picks, say). */
    interface Send {
        SendResult send() throws Exception;
    }

    /** Makes the send and checks its answer as sendOK(p, m) does. */
    static SendResult sendOK(Message m, Send send) throws Exception {
        SendResult r;
        for (int i = 0, noRoute = 0;; i++) {
            try {
                r = send.send();
                break;
            } catch (MQBrokerException e) {
                if (e.getResponseCode() != 2 || i >= BUSY_RETRIES) {
                    throw e;
                }
                System.out.println("broker busy (code 2), sending again: " + e.getErrorMessage());
                Thread.sleep(100);
            } catch (MQClientException e) {
                if (e.getResponseCode() != ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION || ++noRoute > 2) {
                    throw e;
                }
                System.out.println("the client found no route for " + m.getTopic() + ", sending again");
                Thread.sleep(500);
            }
        }
        if (r.getSendStatus() != SendStatus.SEND_OK) {
            throw fail("send to %s answered %s, want SEND_OK", m.getTopic(), r.getSendStatus());
        }
        return r;
    }

    /** A message with body, tag, keys and one user property, all of which should round-trip. */
    static Message message(String topic, String tag, String keys, String body) {
        Message m = new Message(topic, tag, keys, body.getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("compat", "java-remoting");
        return m;
    }

    static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    /**
     * Says what of a delivered message differs from what was sent (body,
     * tag, keys, the user property), or null when nothing does.
     */
    static String roundTrip(Message sent, MessageExt got) {
        List<String> diffs = new ArrayList<>();
        if (!java.util.Arrays.equals(sent.getBody(), got.getBody())) {
            diffs.add("body " + body(got));
        }
        if (!String.valueOf(sent.getTags()).equals(String.valueOf(got.getTags()))) {
            diffs.add("tag " + got.getTags() + " (sent " + sent.getTags() + ")");
        }
        if (!String.valueOf(sent.getKeys()).equals(String.valueOf(got.getKeys()))) {
            diffs.add("keys " + got.getKeys() + " (sent " + sent.getKeys() + ")");
        }
        if (!"java-remoting".equals(got.getUserProperty("compat"))) {
            diffs.add("user property compat=" + got.getUserProperty("compat"));
        }
        return diffs.isEmpty() ? null : String.join(", ", diffs);
    }

    /** "p50 X ms, p99 Y ms, max Z ms" of the values (milliseconds). */
    static String stats(List<Long> ms) {
        if (ms.isEmpty()) {
            return "no values";
        }
        List<Long> s = new ArrayList<>(ms);
        Collections.sort(s);
        return String.format(Locale.ROOT, "p50 %d ms, p99 %d ms, max %d ms (n=%d)",
            s.get((s.size() - 1) / 2), s.get((int) Math.ceil(s.size() * 0.99) - 1), s.get(s.size() - 1), s.size());
    }
}
