import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * RocketMQ's ACL signature, as in the client's AclClient example: with the
 * access key and secret of the system properties compat.accessKey and
 * compat.secret, a producer's AclClientRPCHook gets its messages through to
 * a push consumer signing the same way; a producer signing with a wrong
 * secret, and one not signing at all, are refused, and nothing they sent is
 * delivered (checked when a message sent after them has arrived).
 */
public final class AclCase implements Compat.Case {
    @Override
    public void run(Ctx c) throws Exception {
        String key = System.getProperty("compat.accessKey", "app");
        String secret = System.getProperty("compat.secret");
        if (secret == null || secret.isEmpty()) {
            throw Ctx.fail("no secret: set -Dcompat.secret");
        }
        RPCHook good = new AclClientRPCHook(new SessionCredentials(key, secret));
        String topic = c.name("t");
        DefaultMQProducer p = c.producer("p", good);
        Probe probe = new Probe();
        DefaultMQPushConsumer consumer = c.consumer("g", topic, "*", probe, good);
        c.ready(p, topic, consumer, probe);
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            ids.add(Ctx.sendOK(p, Ctx.message(topic, "TagA", "acl-" + i, "signed #" + i)).getMsgId());
        }

        List<String> problems = new ArrayList<>();
        RPCHook wrong = new AclClientRPCHook(new SessionCredentials(key, secret + "-wrong"));
        refused(c, problems, "a wrong secret", c.producer("wrong", wrong), topic);
        refused(c, problems, "no signature", c.producer("unsigned", null), topic);

        ids.add(Ctx.sendOK(p, Ctx.message(topic, "TagA", "acl-last", "signed, last")).getMsgId());
        if (!probe.await(ids, 30_000)) {
            problems.add(String.format("the signed consumer got %d of %d signed messages in 30 s",
                DelayCase.count(probe, ids), ids.size()));
        }
        int extra = probe.distinct() - 1 - ids.size(); // 1: the ready message
        if (extra > 0) {
            problems.add(extra + " messages of the refused producers were delivered");
        }
        if (!problems.isEmpty()) {
            throw Ctx.fail("%s", String.join("; ", problems));
        }
    }

    private static void refused(Ctx c, List<String> problems, String how, DefaultMQProducer p, String topic) {
        try {
            SendResult r = p.send(Ctx.message(topic, "TagA", "acl-refused", "with " + how));
            if (r.getSendStatus() == SendStatus.SEND_OK) {
                problems.add("a send with " + how + " was accepted");
            } else {
                c.log("a send with %s answered %s", how, r.getSendStatus());
            }
        } catch (Exception e) {
            c.log("a send with %s was refused: %s", how, QueryCase.firstLine(e));
        }
    }
}
