import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The lite pull consumer, as in the client's LitePullConsumerSubscribe and
 * LitePullConsumerAssign examples: subscribed, it polls every message sent;
 * assigned every queue and sought to each queue's beginning, it polls them
 * all again; it commits, and after it shut down a new consumer of its group
 * reads each queue's committed offset from the broker equal to the queue's
 * max offset.
 */
public final class LitePullCase implements Compat.Case {
    static final int N = 10;

    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", null);
        Set<String> ids = new HashSet<>();
        for (int i = 0; i < N; i++) {
            ids.add(Ctx.sendOK(p, Ctx.message(topic, "TagP", "lite-" + i, "pull me #" + i)).getMsgId());
        }

        DefaultLitePullConsumer sub = lite(c, "sub");
        sub.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        sub.subscribe(topic, "*");
        sub.start();
        List<String> got = poll(sub, ids, 30_000);
        if (!new HashSet<>(got).containsAll(ids)) {
            throw Ctx.fail("the subscribed lite pull consumer polled %d of %d messages in 30 s", count(got, ids), N);
        }
        sub.shutdown();
        c.log("subscribed: polled all %d", N);

        DefaultLitePullConsumer asg = lite(c, "assign");
        asg.setAutoCommit(false);
        asg.start();
        Collection<MessageQueue> mqs = asg.fetchMessageQueues(topic);
        asg.assign(mqs);
        for (MessageQueue mq : mqs) {
            asg.seekToBegin(mq);
        }
        got = poll(asg, ids, 30_000);
        if (!new HashSet<>(got).containsAll(ids)) {
            throw Ctx.fail("the assigned lite pull consumer polled %d of %d messages in 30 s after seeking to the beginning",
                count(got, ids), N);
        }
        if (got.size() != N) {
            throw Ctx.fail("the assigned lite pull consumer polled %d messages, want %d", got.size(), N);
        }
        asg.commitSync();
        asg.shutdown();

        DefaultLitePullConsumer check = lite(c, "assign");
        check.start();
        check.assign(mqs);
        List<String> problems = new ArrayList<>();
        for (MessageQueue mq : mqs) {
            long committed = check.committed(mq), max = p.maxOffset(mq);
            if (committed != max) {
                problems.add(String.format("queue %d: committed offset %d, max offset %d", mq.getQueueId(), committed, max));
            }
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("after commitSync and shutdown: %s", String.join("; ", problems));
        }
        c.log("assigned, sought to the beginning: polled all %d again; committed offsets = max offsets on %d queues",
            N, mqs.size());
    }

    private static DefaultLitePullConsumer lite(Ctx c, String group) {
        DefaultLitePullConsumer l = new DefaultLitePullConsumer(c.name(group));
        l.setNamesrvAddr(c.namesrv);
        l.setMqClientApiTimeout(10_000);
        l.setInstanceName(c.name + "-" + group + "-" + System.nanoTime());
        c.onClose(l::shutdown);
        return l;
    }

    private static List<String> poll(DefaultLitePullConsumer l, Set<String> want, long ms) {
        List<String> got = new ArrayList<>();
        long until = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < until && !new HashSet<>(got).containsAll(want)) {
            for (MessageExt m : l.poll(1_000)) {
                got.add(m.getMsgId());
            }
        }
        return got;
    }

    private static long count(List<String> got, Set<String> want) {
        return want.stream().filter(new HashSet<>(got)::contains).count();
    }
}
