import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Retries up to the dead letters, as 4.x consumers rely on them: a listener
 * answers RECONSUME_LATER to one message (the first of queue 0) each time; with
 * setMaxReconsumeTimes(2) it comes back twice (reconsume times 1 and 2, not
 * before delay levels 3 and 4, 10 s and 30 s, after the previous delivery),
 * on its own topic, with its message ID, body, tag, keys and user property,
 * and RETRY_TOPIC and ORIGIN_MESSAGE_ID; then a consumer of %DLQ%group gets
 * it with the same ID, body, tag, keys and user property.
 */
public final class RetryCase implements Compat.Case {
    static final int MAX_RECONSUME = 2;
    static final long[] RETRY_MS = {10_000, 30_000};

    @Override
    public long timeoutMillis() {
        return 180_000;
    }

    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        String group = c.name("g");
        DefaultMQProducer p = c.producer("p", null);
        Probe probe = new Probe(m -> "retry-me".equals(m.getKeys())
            ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        DefaultMQPushConsumer consumer = c.consumer("g", topic, "*", probe, null);
        consumer.setMaxReconsumeTimes(MAX_RECONSUME);
        // The message retried is the first of queue 0 (the ready message
        // goes to queue 1): then its queue and offset are those of its
        // first retry copy in %RETRY%<group>, which has one queue, as they
        // are for every new topic whose first message lands on queue 0. A
        // broker that told the two apart by queue and offset alone took the
        // copy's send-back for the original's.
        MessageQueueSelector queue = (List<MessageQueue> mqs, Message m, Object arg) -> mqs.get((Integer) arg);
        Message readyMsg = Ctx.message(topic, "Ready", c.name("ready"), "ready");
        String ready = Ctx.sendOK(readyMsg, () -> p.send(readyMsg, queue, 1)).getMsgId();
        consumer.start();
        if (!probe.await(List.of(ready), 30_000)) {
            throw Ctx.fail("the consumer did not receive a plain message sent before it started in 30 s");
        }

        Message sent = Ctx.message(topic, "TagR", "retry-me", "retry until dead");
        SendResult r = Ctx.sendOK(sent, () -> p.send(sent, queue, 0));
        if (r.getMessageQueue().getQueueId() != 0) {
            throw Ctx.fail("the send to queue 0 was answered for queue %d", r.getMessageQueue().getQueueId());
        }
        String id = r.getMsgId();
        if (!probe.awaitTimes(id, MAX_RECONSUME + 1, 80_000)) {
            throw Ctx.fail("the message was delivered %d times in 80 s, want %d (first and %d retries)",
                probe.arrivals(id).size(), MAX_RECONSUME + 1, MAX_RECONSUME);
        }
        List<Probe.Arrival> a = probe.arrivals(id);
        List<String> problems = new ArrayList<>();
        for (int i = 0; i <= MAX_RECONSUME; i++) {
            MessageExt m = a.get(i).msg;
            if (m.getReconsumeTimes() != i) {
                problems.add(String.format("delivery %d has reconsume times %d", i + 1, m.getReconsumeTimes()));
            }
            String diff = Ctx.roundTrip(sent, m);
            if (diff != null) {
                problems.add(String.format("delivery %d changed: %s", i + 1, diff));
            }
            if (!topic.equals(m.getTopic())) {
                problems.add(String.format("delivery %d on topic %s", i + 1, m.getTopic()));
            }
            if (i == 0) {
                continue;
            }
            long gap = a.get(i).at - a.get(i - 1).at;
            c.log("retry %d came %d ms after the previous delivery (level %d: %d ms)", i, gap, 2 + i, RETRY_MS[i - 1]);
            if (gap < RETRY_MS[i - 1]) {
                problems.add(String.format("retry %d came %d ms after the previous delivery, before level %d's %d ms",
                    i, gap, 2 + i, RETRY_MS[i - 1]));
            }
            for (String prop : new String[] {"RETRY_TOPIC", "ORIGIN_MESSAGE_ID"}) {
                if (m.getProperty(prop) == null) {
                    problems.add(String.format("retry %d lacks the %s property", i, prop));
                }
            }
        }
        if (a.size() > MAX_RECONSUME + 1) {
            problems.add("delivered " + a.size() + " times, want " + (MAX_RECONSUME + 1));
        }

        String dlq = "%DLQ%" + group;
        String unreadable = awaitReadable(c, dlq);
        if (unreadable != null) {
            problems.add(unreadable);
            throw Ctx.fail("%s", String.join("; ", problems));
        }
        Probe dead = new Probe();
        DefaultMQPushConsumer dlqConsumer = c.consumer("dlq", dlq, "*", dead, null);
        dlqConsumer.start();
        if (!dead.await(List.of(id), 30_000)) {
            problems.add("the message did not arrive in " + dlq + " in 30 s");
        } else {
            MessageExt m = dead.arrivals(id).get(0).msg;
            String diff = Ctx.roundTrip(sent, m);
            if (diff != null) {
                problems.add("the dead letter changed: " + diff);
            }
            c.log("dead letter in %s: id %s, reconsume times %d", dlq, m.getMsgId(), m.getReconsumeTimes());
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
    }

    /**
     * Waits until topic has readable queues through the name server, and
     * returns null, or what went wrong after 45 s. In Apache RocketMQ a
     * dead-letter topic comes into being with the send that fills it, which
     * the client makes after the listener returned: a consumer of it
     * started before its route exists would wait for the client's next
     * route refresh (30 s). A lite pull consumer's fetchMessageQueues asks
     * the name server (a push consumer's answers only for topics it
     * subscribes, and the producer's only for writable ones).
     */
    static String awaitReadable(Ctx c, String topic) throws Exception {
        DefaultLitePullConsumer routes = new DefaultLitePullConsumer(c.name("routes"));
        routes.setNamesrvAddr(c.namesrv);
        routes.setMqClientApiTimeout(10_000);
        routes.setInstanceName(c.name + "-routes");
        routes.start();
        c.onClose(routes::shutdown);
        long until = System.currentTimeMillis() + 45_000;
        while (true) {
            try {
                if (!routes.fetchMessageQueues(topic).isEmpty()) {
                    return null;
                }
            } catch (Exception e) {
                if (System.currentTimeMillis() > until) {
                    return topic + " has no readable queue 45 s after the last retry: " + QueryCase.firstLine(e);
                }
            }
            Thread.sleep(200);
        }
    }
}
