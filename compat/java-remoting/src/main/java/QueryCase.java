import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Queries, as the clients' MQAdmin calls (and the admin tools) make them:
 * viewMessage by the message ID a send returned and by its offset message
 * ID, and queryMessage by key, each finding the message with its body and
 * keys; an ID and a key that the broker never handed out find nothing. (A
 * delayed message not yet due is not looked up: RocketMQ indexes it under
 * its schedule topic until it is due, so no client finds it by its topic.)
 */
public final class QueryCase implements Compat.Case {
    @Override
    public void run(Ctx c) throws Exception {
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", null);
        String key = c.name("key");
        Message plain = Ctx.message(topic, "TagQ", key, "find me");
        SendResult r = Ctx.sendOK(p, plain);

        List<String> problems = new ArrayList<>();
        check(problems, "viewMessage(topic, msgId)", plain, view(p, topic, r.getMsgId()));
        check(problems, "viewMessage(topic, offsetMsgId)", plain, view(p, topic, r.getOffsetMsgId()));
        check(problems, "queryMessage(topic, key)", plain, query(p, topic, key, r.getMsgId()));

        // IDs of the same form that this broker never handed out: the
        // send's message ID with a digit of its class-loader hash changed
        // (the hash sits before the last 12 digits, time and counter, so
        // no message of this or another client has it), and its offset ID
        // with a high digit of its offset changed (far past the log's end).
        String id = r.getMsgId(), offsetId = r.getOffsetMsgId();
        for (String forged : new String[] {flip(id, id.length() - 16), flip(offsetId, offsetId.length() - 15)}) {
            try {
                MessageExt m = p.viewMessage(topic, forged);
                problems.add("viewMessage of " + forged + ", never handed out, returned a message: "
                    + (m == null ? null : Ctx.body(m)));
            } catch (Exception e) {
                c.log("viewMessage of %s, never handed out: %s", forged, firstLine(e));
            }
        }
        try {
            QueryResult q = p.queryMessage(topic, key + "-never", 32, 0, Long.MAX_VALUE);
            if (!q.getMessageList().isEmpty()) {
                problems.add("queryMessage of a key never sent returned " + q.getMessageList().size() + " messages");
            }
        } catch (Exception e) {
            c.log("queryMessage of a key never sent: %s", firstLine(e));
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
    }

    private static void check(List<String> problems, String how, Message sent, Object got) {
        if (got instanceof String) {
            problems.add(how + ": " + got);
        } else {
            String diff = Ctx.roundTrip(sent, (MessageExt) got);
            if (diff != null) {
                problems.add(how + " found a different message: " + diff);
            }
        }
    }

    /** The message, or a String saying why there is none. */
    private static Object view(DefaultMQProducer p, String topic, String id) throws InterruptedException {
        // The broker's index may trail the send (RocketMQ builds it apart).
        long until = System.currentTimeMillis() + 10_000;
        while (true) {
            try {
                MessageExt m = p.viewMessage(topic, id);
                if (m != null) {
                    return m;
                }
            } catch (Exception e) {
                if (System.currentTimeMillis() > until) {
                    return "not found: " + firstLine(e);
                }
            }
            if (System.currentTimeMillis() > until) {
                return "returned null";
            }
            Thread.sleep(200);
        }
    }

    private static Object query(DefaultMQProducer p, String topic, String key, String id) throws InterruptedException {
        long until = System.currentTimeMillis() + 10_000;
        String why = "nothing";
        while (System.currentTimeMillis() < until) {
            try {
                long now = System.currentTimeMillis();
                QueryResult q = p.queryMessage(topic, key, 32, now - 3_600_000, now + 3_600_000);
                for (MessageExt m : q.getMessageList()) {
                    if (id.equals(m.getMsgId())) {
                        return m;
                    }
                }
                why = q.getMessageList().size() + " messages, none with ID " + id;
            } catch (Exception e) {
                why = firstLine(e);
            }
            Thread.sleep(200);
        }
        return "not found in 10 s: " + why;
    }

    /** id with its hex digit at i changed. */
    private static String flip(String id, int i) {
        char d = id.charAt(i);
        return id.substring(0, i) + (d == '7' ? '8' : '7') + id.substring(i + 1);
    }

    static String firstLine(Exception e) {
        String s = String.valueOf(e.getMessage());
        int nl = s.indexOf('\n');
        return e.getClass().getSimpleName() + ": " + (nl < 0 ? s : s.substring(0, nl));
    }
}
