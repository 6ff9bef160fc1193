import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * The official RocketMQ 5 Java client against hourglass, unchanged: send a
 * normal message, a delayed one (5 s) and a delayed one it recalls, then a
 * SimpleConsumer receives and acks. Exits 0 when the normal and delayed
 * messages arrived, the delayed one not before its timestamp, and the
 * recalled one never; and when a PushConsumer's listener gets five
 * delayed messages, each once and none early; 1 otherwise, saying why.
 *
 * Usage: java RoundTrip ENDPOINT ssl|plaintext TOPIC
 *
 * With HOURGLASS_ACCESS_SECRET set in the environment, every call is signed
 * with it (access key "app"), as against a broker run with --auth-token.
 */
public final class RoundTrip {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: RoundTrip ENDPOINT ssl|plaintext TOPIC");
            System.exit(2);
        }
        String endpoint = args[0], topic = args[2];
        boolean ssl = args[1].equals("ssl");
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint).enableSsl(ssl).setRequestTimeout(Duration.ofSeconds(5));
        String secret = System.getenv("HOURGLASS_ACCESS_SECRET");
        if (secret != null && !secret.isEmpty()) {
            builder.setCredentialProvider(new StaticSessionCredentialsProvider("app", secret));
        }
        ClientConfiguration cfg = builder.build();

        String normalId, delayedId, recalledId;
        long due;
        try (Producer producer = provider.newProducerBuilder()
                .setClientConfiguration(cfg).setTopics(topic).build()) {
            // The first send warms the client up (a loaded machine may take
            // seconds over it); the due time is counted after it, and the
            // message to recall goes first so that its recall comes well
            // before it falls due (a recall after that is refused, rightly).
            normalId = send(producer, provider.newMessageBuilder().setTopic(topic)
                .setKeys("java-normal").setBody(bytes("now")).build()).getMessageId().toString();
            due = System.currentTimeMillis() + 5000;
            SendReceipt toRecall = send(producer, provider.newMessageBuilder().setTopic(topic)
                .setKeys("java-recalled").setBody(bytes("never")).setDeliveryTimestamp(due).build());
            recalledId = toRecall.getMessageId().toString();
            producer.recallMessage(topic, toRecall.getRecallHandle());
            delayedId = send(producer, provider.newMessageBuilder().setTopic(topic)
                .setKeys("java-delayed").setBody(bytes("later")).setDeliveryTimestamp(due).build())
                .getMessageId().toString();
        }

        Map<String, FilterExpression> sub = Collections.singletonMap(topic, FilterExpression.SUB_ALL);
        Map<String, Integer> seen = new HashMap<>();
        int failures = 0;
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(cfg)
                .setConsumerGroup("java-compat").setSubscriptionExpressions(sub)
                .setAwaitDuration(Duration.ofSeconds(1)).build()) {
            // Receive until the delayed message came and one more second
            // passed, in which a recalled message would have shown up.
            long until = System.currentTimeMillis() + 20000;
            long quietAfter = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(until, quietAfter)) {
                List<MessageView> views;
                try {
                    views = consumer.receive(16, Duration.ofSeconds(30));
                } catch (ClientException e) {
                    continue; // an empty long poll ends with MESSAGE_NOT_FOUND
                }
                long at = System.currentTimeMillis();
                for (MessageView v : views) {
                    String id = v.getMessageId().toString();
                    seen.merge(id, 1, Integer::sum);
                    if (id.equals(delayedId)) {
                        if (at < due) {
                            System.err.printf("FAIL: the delayed message arrived %d ms early%n", due - at);
                            failures++;
                        }
                        quietAfter = at + 1000;
                    }
                    consumer.ack(v);
                }
            }
        }
        for (String id : new String[] {normalId, delayedId}) {
            if (seen.getOrDefault(id, 0) != 1) {
                System.err.printf("FAIL: message %s received %d times, want once%n", id, seen.getOrDefault(id, 0));
                failures++;
            }
        }
        if (seen.containsKey(recalledId)) {
            System.err.printf("FAIL: the recalled message %s was received%n", recalledId);
            failures++;
        }
        System.out.printf("java client (%s): sent 3, recalled 1, received %s%n", ssl ? "TLS" : "plaintext", seen);
        failures += push(provider, cfg, topic + "-push");
        System.exit(failures == 0 ? 0 : 1);
    }

    /** Five delayed messages to a PushConsumer's listener; returns the failures. */
    private static int push(ClientServiceProvider provider, ClientConfiguration cfg, String topic) throws Exception {
        final int n = 5;
        Map<String, Long> dueOf = new HashMap<>();
        try (Producer producer = provider.newProducerBuilder()
                .setClientConfiguration(cfg).setTopics(topic).build()) {
            long due = System.currentTimeMillis() + 2000;
            for (int i = 0; i < n; i++) {
                long at = due + i * 100L;
                SendReceipt r = send(producer, provider.newMessageBuilder().setTopic(topic)
                    .setBody(bytes("push " + i)).setDeliveryTimestamp(at).build());
                dueOf.put(r.getMessageId().toString(), at);
            }
        }
        Map<String, Integer> got = new ConcurrentHashMap<>();
        Map<String, Long> arrived = new ConcurrentHashMap<>();
        CountDownLatch all = new CountDownLatch(n);
        int failures = 0;
        try (PushConsumer consumer = provider.newPushConsumerBuilder().setClientConfiguration(cfg)
                .setConsumerGroup("java-compat-push")
                .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
                .setMessageListener(v -> {
                    String id = v.getMessageId().toString();
                    arrived.putIfAbsent(id, System.currentTimeMillis());
                    if (got.merge(id, 1, Integer::sum) == 1) {
                        all.countDown();
                    }
                    return ConsumeResult.SUCCESS;
                }).build()) {
            if (!all.await(20, TimeUnit.SECONDS)) {
                System.err.printf("FAIL: the push consumer got %d of %d messages in 20 s%n", got.size(), n);
                failures++;
            }
        }
        for (Map.Entry<String, Long> e : dueOf.entrySet()) {
            int times = got.getOrDefault(e.getKey(), 0);
            if (times != 1) {
                System.err.printf("FAIL: push message %s received %d times, want once%n", e.getKey(), times);
                failures++;
            } else if (arrived.get(e.getKey()) < e.getValue()) {
                System.err.printf("FAIL: push message %s arrived %d ms early%n", e.getKey(),
                    e.getValue() - arrived.get(e.getKey()));
                failures++;
            }
        }
        System.out.printf("java push consumer: %d delayed messages, received %s%n", n, got);
        return failures;
    }

    private static SendReceipt send(Producer p, Message m) throws ClientException {
        return p.send(m);
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
