import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.LitePushConsumer;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The 5.x gRPC Java client (rocketmq-client-java) running differential scenarios against one endpoint.
 * Args: endpoint liteEndpoint suffix section... ; each section runs in its own thread, on its own topics and
 * groups (named J5&lt;Kind&gt;&lt;suffix&gt;, made with mqadmin beforehand). Sections: normal, fifo, delay, tx,
 * priority, change, push, dlq, recall, lite, litenew. Prints JSON lines: {"op":..., "section":..., ...};
 * a section's failure is {"op":"error","section":...,"code":...,"error":...}; message ids are reported as the
 * label of the send that made them.
 */
public class Grpc5Scenario {
    static ClientServiceProvider provider = ClientServiceProvider.loadService();
    static String endpoint, liteEndpoint, suffix;
    static final Map<String, String> LABELS = new ConcurrentHashMap<>();
    static final Pattern CODE = Pattern.compile("response-code=(\\d+)");

    public static void main(String[] args) throws Exception {
        endpoint = args[0];
        liteEndpoint = args[1];
        suffix = args[2];
        List<Thread> threads = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            String section = args[i];
            Thread t = new Thread(() -> {
                long t0 = System.currentTimeMillis();
                try {
                    run(section);
                } catch (Throwable e) {
                    error(section, e);
                }
                Json.event("done", "section", section, "ms", System.currentTimeMillis() - t0);
            }, section);
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        System.exit(0);
    }

    static void run(String section) throws Exception {
        switch (section) {
            case "normal": normal(); break;
            case "fifo": fifo(); break;
            case "delay": delay(); break;
            case "tx": tx(); break;
            case "priority": priority(); break;
            case "change": change(); break;
            case "push": push(); break;
            case "dlq": dlq(); break;
            case "recall": recall(); break;
            case "lite": lite(); break;
            case "litenew": liteNew(); break;
            default: throw new IllegalArgumentException("unknown section " + section);
        }
    }

    static String name(String kind) {
        return "J5" + kind + suffix;
    }

    /** TLS off, unless -Dgrpc5.tls=default: the client's own default (TLS on). */
    static ClientConfiguration conf(String ep) {
        org.apache.rocketmq.client.apis.ClientConfigurationBuilder b = ClientConfiguration.newBuilder().setEndpoints(ep)
            .setRequestTimeout(Duration.ofSeconds(10));
        if (!"default".equals(System.getProperty("grpc5.tls"))) {
            b.enableSsl(false);
        }
        return b.build();
    }

    static String codeOf(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            Matcher m = CODE.matcher(String.valueOf(c.getMessage()));
            if (m.find()) {
                return m.group(1);
            }
        }
        return e.getClass().getSimpleName();
    }

    static String textOf(Throwable e) {
        String s = String.valueOf(e.getMessage());
        return s.replaceAll("request-id=[^,\\]]*", "request-id=<id>").replaceAll("Impl-\\d+", "Impl-N");
    }

    /** The innermost cause's message: why a client failed to start. */
    static String rootOf(Throwable e) {
        Throwable c = e;
        while (c.getCause() != null && c.getCause() != c) {
            c = c.getCause();
        }
        return c.getClass().getSimpleName() + ": " + textOf(c);
    }

    static void error(String section, Throwable e) {
        Json.event("error", "section", section, "code", codeOf(e), "error", textOf(e));
    }

    static Producer producer(String ep, String... topics) throws Exception {
        return provider.newProducerBuilder().setClientConfiguration(conf(ep)).setTopics(topics).build();
    }

    static SimpleConsumer simple(String ep, String group, String topic) throws Exception {
        return provider.newSimpleConsumerBuilder().setClientConfiguration(conf(ep)).setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(3))
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL)).build();
    }

    static Map<String, Object> view(MessageView v) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", LABELS.getOrDefault(v.getMessageId().toString(), "<other>"));
        m.put("body", StandardCharsets.UTF_8.decode(v.getBody()).toString());
        m.put("tag", v.getTag().orElse(null));
        List<String> keys = new ArrayList<>(v.getKeys());
        Collections.sort(keys);
        m.put("keys", keys);
        m.put("props", new java.util.TreeMap<>(v.getProperties()));
        m.put("group", v.getMessageGroup().orElse(null));
        m.put("lite", v.getLiteTopic().orElse(null));
        m.put("priority", v.getPriority().orElse(null));
        m.put("delivery", v.getDeliveryTimestamp().isPresent());
        m.put("attempt", v.getDeliveryAttempt());
        return m;
    }

    /** Send and label; a refusal is reported as an event, not thrown. */
    static SendReceipt send(String section, Producer p, String label, MessageBuilder b) {
        try {
            SendReceipt r = p.send(b.build());
            LABELS.put(r.getMessageId().toString(), label);
            Json.event("sent", "section", section, "label", label, "recall", r.getRecallHandle() != null
                && !r.getRecallHandle().isEmpty());
            return r;
        } catch (Throwable e) {
            Json.event("refused", "section", section, "label", label, "code", codeOf(e), "error", textOf(e));
            return null;
        }
    }

    static MessageBuilder msg(String topic, String body) {
        return provider.newMessageBuilder().setTopic(topic).setBody(body.getBytes(StandardCharsets.UTF_8));
    }

    static List<MessageView> receive(SimpleConsumer c, int want, Duration invisible, long timeoutMs, boolean ack)
        throws Exception {
        List<MessageView> got = new ArrayList<>();
        long end = System.currentTimeMillis() + timeoutMs;
        while (got.size() < want && System.currentTimeMillis() < end) {
            for (MessageView v : c.receive(16, invisible)) {
                got.add(v);
                if (ack) {
                    c.ack(v);
                }
            }
        }
        return got;
    }

    static void emitGot(String section, String op, List<MessageView> views) {
        List<Object> out = new ArrayList<>();
        for (MessageView v : views) {
            out.add(view(v));
        }
        Json.event(op, "section", section, "messages", out);
    }

    // ------------------------------------------------------------------------------------------ sections
    static void normal() throws Exception {
        String topic = name("Normal");
        try (Producer p = producer(endpoint, topic)) {
            send("normal", p, "n0", msg(topic, "n0").setTag("TagA").setKeys("k1", "k2").addProperty("color", "red"));
            send("normal", p, "n1", msg(topic, "n1"));
            send("normal", p, "n2", msg(topic, "n2").setTag("TagB").addProperty("a", "1").addProperty("b", "2"));
            send("normal", p, "fifo-on-normal", msg(topic, "x").setMessageGroup("g"));
            send("normal", p, "delay-on-normal", msg(topic, "x")
                .setDeliveryTimestamp(System.currentTimeMillis() + 60000));
            send("normal", p, "priority-on-normal", msg(topic, "x").setPriority(3));
        }
        try (SimpleConsumer c = simple(endpoint, name("NormalG"), topic)) {
            emitGot("normal", "got", receive(c, 3, Duration.ofSeconds(15), 30000, true));
        }
    }

    static void fifo() throws Exception {
        String topic = name("Fifo");
        try (Producer p = producer(endpoint, topic)) {
            for (int i = 0; i < 4; i++) {
                for (int g = 0; g < 2; g++) {
                    send("fifo", p, "g" + g + "-" + i, msg(topic, "g" + g + "-" + i).setMessageGroup("order-" + g));
                }
            }
            send("fifo", p, "normal-on-fifo", msg(topic, "x"));
        }
        try (SimpleConsumer c = simple(endpoint, name("FifoG"), topic)) {
            emitGot("fifo", "got", receive(c, 8, Duration.ofSeconds(15), 40000, true));
        }
    }

    static void delay() throws Exception {
        String topic = name("Delay");
        try (SimpleConsumer c = simple(endpoint, name("DelayG"), topic); Producer p = producer(endpoint, topic)) {
            long sentAt = System.currentTimeMillis();
            send("delay", p, "later", msg(topic, "later").setDeliveryTimestamp(sentAt + 3000));
            List<MessageView> got = receive(c, 1, Duration.ofSeconds(15), 30000, true);
            emitGot("delay", "got", got);
            Json.event("age", "section", "delay", "early", System.currentTimeMillis() - sentAt < 2500);
        }
    }

    static void tx() throws Exception {
        String topic = name("Tx");
        List<String> checked = new CopyOnWriteArrayList<>();
        try (Producer p = provider.newProducerBuilder().setClientConfiguration(conf(endpoint)).setTopics(topic)
            .setTransactionChecker(v -> {
                // a check may come before the client's own end arrives (1 s check-backs): only the orphan is the
                // checker's to settle
                String label = LABELS.getOrDefault(v.getMessageId().toString(), "<other>");
                checked.add(label);
                return label.equals("orphan") ? TransactionResolution.COMMIT : TransactionResolution.UNKNOWN;
            }).build()) {
            for (String what : new String[] {"commit", "rollback", "orphan"}) {
                Transaction t = p.beginTransaction();
                SendReceipt r = p.send(msg(topic, what).setTag("tx").build(), t);
                LABELS.put(r.getMessageId().toString(), what);
                if (what.equals("commit")) {
                    t.commit();
                } else if (what.equals("rollback")) {
                    t.rollback();
                }
            }
            try (SimpleConsumer c = simple(endpoint, name("TxG"), topic)) {
                List<MessageView> got = receive(c, 2, Duration.ofSeconds(15), 40000, true);
                got.addAll(receive(c, 1, Duration.ofSeconds(15), 3000, true));
                emitGot("tx", "got", got);
            }
            Json.event("checked", "section", "tx", "orphan", checked.contains("orphan"));
        }
    }

    static void priority() throws Exception {
        String topic = name("Prio");
        try (Producer p = producer(endpoint, topic)) {
            for (int i = 0; i < 6; i++) {
                send("priority", p, "low" + i, msg(topic, "low" + i).setPriority(0));
            }
            for (int i = 0; i < 3; i++) {
                send("priority", p, "high" + i, msg(topic, "high" + i).setPriority(7));
            }
            send("priority", p, "normal-on-priority", msg(topic, "x"));
        }
        try (SimpleConsumer c = simple(endpoint, name("PrioG"), topic)) {
            emitGot("priority", "got", receive(c, 9, Duration.ofSeconds(15), 30000, true));
        }
    }

    static void change() throws Exception {
        String topic = name("Change");
        try (Producer p = producer(endpoint, topic)) {
            send("change", p, "extend", msg(topic, "extend"));
        }
        try (SimpleConsumer c = simple(endpoint, name("ChangeG"), topic)) {
            // 3 s to call changeInvisibleDuration in time on a loaded machine (a handle past its invisible time
            // is refused as expired), then 6 s: back after the new time, with attempt 2
            List<MessageView> first = receive(c, 1, Duration.ofSeconds(3), 20000, false);
            emitGot("change", "first", first);
            c.changeInvisibleDuration(first.get(0), Duration.ofSeconds(6));
            long changed = System.currentTimeMillis();
            List<MessageView> again = receive(c, 1, Duration.ofSeconds(15), 25000, false);
            emitGot("change", "again", again);
            Json.event("after", "section", "change", "early", System.currentTimeMillis() - changed < 5500);
            for (MessageView v : again) {
                c.ack(v);
            }
        }
    }

    static void push() throws Exception {
        String topic = name("Push");
        List<MessageView> seen = new CopyOnWriteArrayList<>();
        try (PushConsumer c = provider.newPushConsumerBuilder().setClientConfiguration(conf(endpoint))
            .setConsumerGroup(name("PushG"))
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setMessageListener(v -> {
                seen.add(v);
                String body = StandardCharsets.UTF_8.decode(v.getBody()).toString();
                return body.equals("fail-once") && v.getDeliveryAttempt() == 1 ? ConsumeResult.FAILURE
                    : ConsumeResult.SUCCESS;
            }).build(); Producer p = producer(endpoint, topic)) {
            for (int i = 0; i < 4; i++) {
                send("push", p, "push" + i, msg(topic, "push" + i));
            }
            send("push", p, "fail-once", msg(topic, "fail-once"));
            long end = System.currentTimeMillis() + 40000;
            while (System.currentTimeMillis() < end && !(seen.size() >= 6)) {
                Thread.sleep(100);
            }
            Thread.sleep(500);
            emitGot("push", "got", new ArrayList<>(seen));
        }
    }

    static void dlq() throws Exception {
        String topic = name("Dlq");
        String group = name("DlqG");
        try (Producer p = producer(endpoint, topic)) {
            send("dlq", p, "poison", msg(topic, "poison"));
        }
        try (SimpleConsumer c = simple(endpoint, group, topic)) {
            List<MessageView> got = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                got.addAll(receive(c, 1, Duration.ofSeconds(1), 20000, false));
            }
            emitGot("dlq", "attempts", got);
            emitGot("dlq", "after", receive(c, 1, Duration.ofSeconds(1), 5000, false));
        }
        String dlq = "%DLQ%" + group;
        // the DLQ topic exists once the broker moved the message there (Java's revive, after the invisible time):
        // a reader started before it fails its start (40402), so it is started again for up to 90 s (a loaded Java
        // broker's revive took over 30 s in a CI run)
        SimpleConsumer reader;
        long until = System.currentTimeMillis() + 90000;
        while (true) {
            try {
                reader = simple(endpoint, name("DlqReader"), dlq);
                break;
            } catch (Exception e) {
                if (System.currentTimeMillis() > until) {
                    throw e;
                }
                Thread.sleep(1000);
            }
        }
        try (SimpleConsumer c = reader) {
            emitGot("dlq", "dlq", receive(c, 1, Duration.ofSeconds(15), 20000, true));
        }
    }

    static void recall() throws Exception {
        String topic = name("Recall");
        try (Producer p = producer(endpoint, topic)) {
            long at = System.currentTimeMillis() + 8000;        // room for a loaded machine before the recall
            send("recall", p, "keep", msg(topic, "keep").setDeliveryTimestamp(at));
            SendReceipt drop = send("recall", p, "drop", msg(topic, "drop").setDeliveryTimestamp(at));
            String handle = drop.getRecallHandle();
            for (String attempt : new String[] {"first", "second"}) {
                try {
                    Json.event("recalled", "section", "recall", "attempt", attempt, "id",
                        LABELS.getOrDefault(p.recallMessage(topic, handle).getMessageId().toString(), "<other>"));
                } catch (Throwable e) {
                    Json.event("recall-refused", "section", "recall", "attempt", attempt, "code", codeOf(e),
                        "error", textOf(e));
                }
            }
            try {
                p.recallMessage(topic, "garbage");
            } catch (Throwable e) {
                Json.event("recall-refused", "section", "recall", "attempt", "garbage", "code", codeOf(e),
                    "error", textOf(e));
            }
        }
        try (SimpleConsumer c = simple(endpoint, name("RecallG"), topic)) {
            emitGot("recall", "got", receive(c, 2, Duration.ofSeconds(15), 20000, true));
        }
    }

    static void lite() throws Exception {
        String topic = name("Lite");
        List<MessageView> seen = new CopyOnWriteArrayList<>();
        try (LitePushConsumer c = provider.newLitePushConsumerBuilder().setClientConfiguration(conf(liteEndpoint))
            .setConsumerGroup(name("LiteG")).bindTopic(topic)
            .setMessageListener(v -> {
                seen.add(v);
                return ConsumeResult.SUCCESS;
            }).build(); Producer p = producer(liteEndpoint, topic)) {
            c.subscribeLite("chat-1");
            c.subscribeLite("chat-2");
            for (int i = 0; i < 3; i++) {
                send("lite", p, "c1-" + i, msg(topic, "c1-" + i).setLiteTopic("chat-1"));
            }
            send("lite", p, "c2-0", msg(topic, "c2-0").setLiteTopic("chat-2"));
            send("lite", p, "c3-0", msg(topic, "c3-0").setLiteTopic("chat-3"));
            send("lite", p, "no-lite-on-lite", msg(topic, "x"));
            long end = System.currentTimeMillis() + 30000;
            while (System.currentTimeMillis() < end && seen.size() < 4) {
                Thread.sleep(100);
            }
            Thread.sleep(1000);
            emitGot("lite", "got", new ArrayList<>(seen));
            Json.event("subscribed", "section", "lite", "set", new ArrayList<>(new java.util.TreeSet<>(c.getLiteTopicSet())));
            try {
                c.subscribeLite("bad name!");
            } catch (Throwable e) {
                Json.event("lite-refused", "section", "lite", "name", "bad", "code", codeOf(e), "error", textOf(e));
            }
            c.unsubscribeLite("chat-2");
            send("lite", p, "c2-1", msg(topic, "c2-1").setLiteTopic("chat-2"));
            send("lite", p, "c1-3", msg(topic, "c1-3").setLiteTopic("chat-1"));
            end = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < end && seen.size() < 5) {
                Thread.sleep(100);
            }
            Thread.sleep(1500);
            emitGot("lite", "after", new ArrayList<>(seen.subList(Math.min(4, seen.size()), seen.size())));
        }
    }

    /** A LitePushConsumer of a group nobody created: what the application sees. */
    static void liteNew() throws Exception {
        String topic = name("Lite");
        try (LitePushConsumer c = provider.newLitePushConsumerBuilder().setClientConfiguration(conf(liteEndpoint))
            .setConsumerGroup(name("LiteNewG")).bindTopic(topic)
            .setMessageListener(v -> ConsumeResult.SUCCESS).build()) {
            Json.event("started", "section", "litenew");
            c.subscribeLite("agent-1");
            Json.event("subscribed", "section", "litenew");
        } catch (Throwable e) {
            Json.event("error", "section", "litenew", "code", codeOf(e), "error", textOf(e), "root", rootOf(e));
        }
    }
}
