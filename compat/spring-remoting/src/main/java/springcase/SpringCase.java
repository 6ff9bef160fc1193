package springcase;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.spring.annotation.RocketMQMessageListener;
import org.apache.rocketmq.spring.core.RocketMQListener;
import org.apache.rocketmq.spring.core.RocketMQTemplate;
import org.apache.rocketmq.spring.support.RocketMQHeaders;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.CommandLineRunner;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.messaging.Message;
import org.springframework.messaging.support.MessageBuilder;
import org.springframework.stereotype.Component;

/**
 * rocketmq-spring-boot-starter, unchanged, as its own samples use it: a
 * RocketMQTemplate (configured by rocketmq.name-server and
 * rocketmq.producer.group) and a @RocketMQMessageListener bean, against
 * hourglass's remoting listener. The template's syncSend with delay level 1
 * (1 s) sends an order with keys, a tag and a header; the listener, which
 * selects the tag "paid", gets it no earlier than its level after the send
 * began, with its body, keys, tag, the header as a user property, the
 * message ID the send returned, and the DELAY property. (Tag filtering and
 * exactly-once delivery are the plain client's cases: this one shows the
 * starter's own path, its template, converters and listener container.)
 *
 * Prints PASS or FAILED with the reason and exits 0 or 1.
 *
 * Usage: java -cp ... springcase.SpringCase --rocketmq.name-server=HOST:PORT
 *   --compat.topic=T --compat.group=G --rocketmq.producer.group=P
 */
@SpringBootApplication
public class SpringCase implements CommandLineRunner {
    static final BlockingQueue<Arrival> ARRIVALS = new LinkedBlockingQueue<>();

    record Arrival(MessageExt msg, long at) {
    }

    @Autowired
    RocketMQTemplate template;

    @Autowired
    Settings settings;

    public static void main(String[] args) {
        int status = 1;
        try (ConfigurableApplicationContext ctx = SpringApplication.run(SpringCase.class, args)) {
            status = 0;
        } catch (Throwable e) {
            Throwable root = e;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            System.out.println("FAILED spring: " + root);
        }
        System.exit(status);
    }

    @Override
    public void run(String... args) throws Exception {
        String topic = settings.topic;
        // The listener's group starts from the queues' ends (the starter's
        // default): it is receiving once a probe sent now comes back.
        long until = System.currentTimeMillis() + 60_000;
        boolean ready = false;
        while (!ready && System.currentTimeMillis() < until) {
            template.syncSend(topic + ":paid", MessageBuilder.withPayload("probe").build());
            Arrival a = ARRIVALS.poll(500, TimeUnit.MILLISECONDS);
            ready = a != null;
        }
        if (!ready) {
            throw new IllegalStateException("the listener got no probe in 60 s");
        }
        Thread.sleep(300);
        ARRIVALS.clear();

        Message<String> order = MessageBuilder.withPayload("{\"order\":\"o-1\",\"total\":42}")
            .setHeader(RocketMQHeaders.KEYS, "o-1").setHeader("tenant", "acme").build();
        long before = System.currentTimeMillis();
        SendResult paid = template.syncSend(topic + ":paid", order, 10_000, 1);
        List<String> problems = new ArrayList<>();
        if (paid.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException("the send answered " + paid.getSendStatus());
        }
        Arrival a = ARRIVALS.poll(20, TimeUnit.SECONDS);
        if (a == null) {
            throw new IllegalStateException("the delayed order did not arrive in 20 s");
        }
        MessageExt m = a.msg();
        String body = new String(m.getBody(), StandardCharsets.UTF_8);
        if (a.at() < before + 1_000) {
            problems.add(String.format("arrived %d ms early", before + 1_000 - a.at()));
        }
        if (!m.getMsgId().equals(paid.getMsgId())) {
            problems.add("message ID " + m.getMsgId() + ", the send returned " + paid.getMsgId());
        }
        if (!body.equals("{\"order\":\"o-1\",\"total\":42}")) {
            problems.add("body " + body);
        }
        if (!"o-1".equals(m.getKeys()) || !"paid".equals(m.getTags()) || !"acme".equals(m.getUserProperty("tenant"))
            || !"1".equals(m.getProperty("DELAY"))) {
            problems.add(String.format("keys %s, tag %s, tenant %s, DELAY %s", m.getKeys(), m.getTags(),
                m.getUserProperty("tenant"), m.getProperty("DELAY")));
        }
        if (!problems.isEmpty()) {
            throw new IllegalStateException(String.join("; ", problems));
        }
        System.out.printf("PASS spring: syncSend at level 1 arrived %d ms after its level, with its ID, body, keys, tag,"
            + " header and DELAY%n", a.at() - before - 1_000);
    }

    /** The case's names, from the command line. */
    @Component
    static class Settings {
        @org.springframework.beans.factory.annotation.Value("${compat.topic}")
        String topic;
    }

    /** The starter's listener, as its samples declare one. */
    @Component
    @RocketMQMessageListener(topic = "${compat.topic}", consumerGroup = "${compat.group}", selectorExpression = "paid")
    static class Listener implements RocketMQListener<MessageExt> {
        @Override
        public void onMessage(MessageExt msg) {
            ARRIVALS.add(new Arrival(msg, System.currentTimeMillis()));
        }
    }
}
