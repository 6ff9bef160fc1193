import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A concurrent listener that records every delivery (when, and the message
 * as delivered) by message ID, the ID that the producer's SendResult gave
 * (UNIQ_KEY), and lets a case wait for a set of IDs to have arrived.
 */
public final class Probe implements MessageListenerConcurrently {
    /** One delivery: when the listener saw it, and what it got. */
    public static final class Arrival {
        final long at;
        final MessageExt msg;

        Arrival(long at, MessageExt msg) {
            this.at = at;
            this.msg = msg;
        }
    }

    private final Map<String, List<Arrival>> byId = new ConcurrentHashMap<>();
    private final Function<MessageExt, ConsumeConcurrentlyStatus> answer;

    /** A probe that answers CONSUME_SUCCESS to everything. */
    Probe() {
        this(m -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
    }

    /** A probe that answers each message with what answer says. */
    Probe(Function<MessageExt, ConsumeConcurrentlyStatus> answer) {
        this.answer = answer;
    }

    @Override
    public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs, ConsumeConcurrentlyContext context) {
        long now = System.currentTimeMillis();
        ConsumeConcurrentlyStatus status = ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        for (MessageExt m : msgs) {
            synchronized (this) {
                byId.computeIfAbsent(m.getMsgId(), k -> new ArrayList<>()).add(new Arrival(now, m));
                notifyAll();
            }
            if (answer.apply(m) == ConsumeConcurrentlyStatus.RECONSUME_LATER) {
                status = ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
        }
        return status;
    }

    /** Waits until every ID has arrived at least once, or ms passed; returns whether all did. */
    synchronized boolean await(Collection<String> ids, long ms) throws InterruptedException {
        long until = System.currentTimeMillis() + ms;
        while (!ids.stream().allMatch(byId::containsKey)) {
            long left = until - System.currentTimeMillis();
            if (left <= 0) {
                return false;
            }
            wait(left);
        }
        return true;
    }

    /** Waits until id has arrived n times or more, or ms passed; returns whether it did. */
    synchronized boolean awaitTimes(String id, int n, long ms) throws InterruptedException {
        long until = System.currentTimeMillis() + ms;
        while (arrivals(id).size() < n) {
            long left = until - System.currentTimeMillis();
            if (left <= 0) {
                return false;
            }
            wait(left);
        }
        return true;
    }

    /** The deliveries of id so far, oldest first. */
    synchronized List<Arrival> arrivals(String id) {
        return new ArrayList<>(byId.getOrDefault(id, List.of()));
    }

    /** How many distinct IDs arrived. */
    synchronized int distinct() {
        return byId.size();
    }

    /** Every ID seen so far. */
    synchronized java.util.Set<String> ids() {
        return new java.util.HashSet<>(byId.keySet());
    }
}
