import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Orderly consumption, as in the client's ordermessage example: each order's
 * steps are sent to one queue chosen by a MessageQueueSelector, and a
 * MessageListenerOrderly (which consumes a queue only while the broker has
 * locked it to this client) gets each order's steps in the order sent. Once
 * it answers SUSPEND_CURRENT_QUEUE_A_MOMENT; that step comes again before
 * the next step of its order.
 */
public final class OrderlyCase implements Compat.Case {
    static final int ORDERS = 4, STEPS = 5;

    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", null);
        Probe probe = new Probe();
        Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
        AtomicBoolean suspended = new AtomicBoolean();
        MessageListenerOrderly listener = (msgs, context) -> {
            // Recorded in seen before the probe, which wakes the case.
            ConsumeOrderlyStatus status = ConsumeOrderlyStatus.SUCCESS;
            for (MessageExt m : msgs) {
                if (!"TagO".equals(m.getTags())) {
                    continue;
                }
                String[] os = Ctx.body(m).split(":");
                int order = Integer.parseInt(os[0]), step = Integer.parseInt(os[1]);
                seen.computeIfAbsent(order, k -> new ArrayList<>()).add(step);
                if (order == 0 && step == 2 && suspended.compareAndSet(false, true)) {
                    status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
            }
            probe.consumeMessage(msgs, null);
            return status;
        };
        DefaultMQPushConsumer consumer = c.consumer("g", topic, "*", listener, null);
        consumer.setConsumeMessageBatchMaxSize(1);
        c.ready(p, topic, consumer, probe);

        List<String> ids = new ArrayList<>();
        for (int step = 0; step < STEPS; step++) {
            for (int order = 0; order < ORDERS; order++) {
                Message m = Ctx.message(topic, "TagO", "order-" + order, order + ":" + step);
                SendResult r = p.send(m, (List<MessageQueue> mqs, Message msg, Object arg) ->
                    mqs.get((Integer) arg % mqs.size()), order);
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    throw Ctx.fail("orderly send answered %s", r.getSendStatus());
                }
                ids.add(r.getMsgId());
            }
        }
        if (!probe.await(ids, 30_000)) {
            throw Ctx.fail("%d of %d ordered messages arrived in 30 s", DelayCase.count(probe, ids), ids.size());
        }
        // The suspended step comes again before the step after it, so once
        // every ID arrived the repeat is in the list too.
        List<String> problems = new ArrayList<>();
        for (int order = 0; order < ORDERS; order++) {
            List<Integer> want = new ArrayList<>();
            for (int step = 0; step < STEPS; step++) {
                want.add(step);
                if (order == 0 && step == 2) {
                    want.add(step);
                }
            }
            List<Integer> got = seen.get(order);
            if (!want.equals(got)) {
                problems.add("order " + order + " consumed steps " + got + ", want " + want);
            }
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
        c.log("%d orders of %d steps each in order, one suspended step redelivered in place", ORDERS, STEPS);
    }
}
