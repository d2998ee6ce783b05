import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The Java client against a replica group (master/slave HA tests). Args: namesrv. Commands on stdin, one JSON
 * line each, answered by one JSON line:
 *   {"cmd":"produce","topic":T,"count":N,"threads":K,"prefix":P,"size":S}  sync sends; SEND_OK keys and the
 *                                                                          other statuses / failures counted
 *   {"cmd":"loop","topic":T,"threads":K,"prefix":P,"size":S}   sync sends until stopLoop (a broker may die meanwhile)
 *   {"cmd":"stopLoop"}                                          {"ok":[keys answered SEND_OK],"other":{..},"failed":n}
 *   {"cmd":"consume","group":G,"topic":T}                       a push consumer from the first offset
 *   {"cmd":"report","group":G}                                  {"keys":[distinct keys received],"received":n}
 *   {"cmd":"stopConsumer","group":G}
 *   {"cmd":"litePull","group":G,"topic":T,"expect":N,"timeoutMs":M}  a lite-pull consumer polls until it has N
 *                                                                      distinct keys (or M ms): {"keys":[...]}
 */
public class ReplicationClients {
    static DefaultMQProducer producer;
    static String ns;
    static final Map<String, DefaultMQPushConsumer> consumers = new ConcurrentHashMap<>();
    static final Map<String, Set<String>> keys = new ConcurrentHashMap<>();
    static final Map<String, AtomicInteger> received = new ConcurrentHashMap<>();
    static final AtomicBoolean looping = new AtomicBoolean(false);
    static final List<Thread> loopThreads = new ArrayList<>();
    static final Set<String> loopOk = ConcurrentHashMap.newKeySet();
    static final Map<String, AtomicInteger> loopOther = new ConcurrentHashMap<>();
    static final AtomicInteger loopFailed = new AtomicInteger();

    public static void main(String[] args) throws Exception {
        ns = args[0];
        producer = new DefaultMQProducer("replication_pg");
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("replication" + System.nanoTime());
        producer.setSendMsgTimeout(5000);
        producer.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("{\"op\":\"ready\"}");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().isEmpty()) continue;
            Map<String, Object> cmd = JSON.parseObject(line);
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("op", cmd.get("cmd"));
            try {
                switch ((String) cmd.get("cmd")) {
                    case "produce": produce(cmd, ev); break;
                    case "loop": loop(cmd); break;
                    case "stopLoop": stopLoop(ev); break;
                    case "consume": consume(cmd); break;
                    case "report": report(cmd, ev); break;
                    case "stopConsumer": consumers.remove((String) cmd.get("group")).shutdown(); break;
                    case "litePull": litePull(cmd, ev); break;
                    default: ev.put("error", "unknown command");
                }
            } catch (Exception e) {
                ev.put("error", String.valueOf(e));
            }
            System.out.println(JSON.toJSONString(ev));
            System.out.flush();
        }
        looping.set(false);
        for (DefaultMQPushConsumer c : consumers.values()) c.shutdown();
        producer.shutdown();
        System.exit(0);
    }

    static Message message(String topic, String key, int size) {
        byte[] body = new byte[size];
        for (int j = 0; j < size; j++) body[j] = (byte) ('a' + (key.hashCode() + j) % 26);
        return new Message(topic, "TagA", key, body);
    }

    static void produce(Map<String, Object> cmd, Map<String, Object> ev) throws Exception {
        String topic = (String) cmd.get("topic"), prefix = (String) cmd.get("prefix");
        int count = (Integer) cmd.get("count"), threads = (Integer) cmd.get("threads"), size = (Integer) cmd.get("size");
        Set<String> ok = ConcurrentHashMap.newKeySet();
        Map<String, AtomicInteger> other = new ConcurrentHashMap<>();
        AtomicInteger next = new AtomicInteger(), failed = new AtomicInteger();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                for (int i = next.getAndIncrement(); i < count; i = next.getAndIncrement()) {
                    String key = prefix + i;
                    try {
                        SendResult r = producer.send(message(topic, key, size));
                        if (r.getSendStatus().name().equals("SEND_OK")) ok.add(key);
                        else other.computeIfAbsent(r.getSendStatus().name(), k -> new AtomicInteger()).incrementAndGet();
                    } catch (Exception e) {
                        failed.incrementAndGet();
                    }
                }
            });
            th.start();
            ts.add(th);
        }
        for (Thread th : ts) th.join();
        ev.put("ok", new ArrayList<>(ok));
        ev.put("other", other);
        ev.put("failed", failed.get());
    }

    static void loop(Map<String, Object> cmd) {
        String topic = (String) cmd.get("topic"), prefix = (String) cmd.get("prefix");
        int threads = (Integer) cmd.get("threads"), size = (Integer) cmd.get("size");
        looping.set(true);
        loopOk.clear();
        loopOther.clear();
        loopFailed.set(0);
        for (int t = 0; t < threads; t++) {
            final int n = t;
            Thread th = new Thread(() -> {
                for (int i = 0; looping.get(); i++) {
                    String key = prefix + n + "-" + i;
                    try {
                        SendResult r = producer.send(message(topic, key, size));
                        if (r.getSendStatus().name().equals("SEND_OK")) loopOk.add(key);
                        else loopOther.computeIfAbsent(r.getSendStatus().name(), k -> new AtomicInteger()).incrementAndGet();
                    } catch (Exception e) {
                        loopFailed.incrementAndGet();
                        try { Thread.sleep(100); } catch (InterruptedException ie) { return; }
                    }
                }
            });
            th.start();
            loopThreads.add(th);
        }
    }

    static void stopLoop(Map<String, Object> ev) throws Exception {
        looping.set(false);
        for (Thread th : loopThreads) th.join(15000);
        loopThreads.clear();
        ev.put("ok", new ArrayList<>(loopOk));
        ev.put("other", loopOther);
        ev.put("failed", loopFailed.get());
    }

    static void consume(Map<String, Object> cmd) throws Exception {
        String group = (String) cmd.get("group"), topic = (String) cmd.get("topic");
        Set<String> got = ConcurrentHashMap.newKeySet();
        AtomicInteger count = new AtomicInteger();
        keys.put(group, got);
        received.put(group, count);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName(group + System.nanoTime());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPersistConsumerOffsetInterval(1000);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                got.add(m.getKeys());
                count.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        consumers.put(group, c);
    }

    static void litePull(Map<String, Object> cmd, Map<String, Object> ev) throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer((String) cmd.get("group"));
        c.setNamesrvAddr(ns);
        c.setInstanceName("lite" + System.nanoTime());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe((String) cmd.get("topic"), "*");
        c.start();
        Set<String> got = ConcurrentHashMap.newKeySet();
        long deadline = System.currentTimeMillis() + ((Number) cmd.get("timeoutMs")).longValue();
        int expect = (Integer) cmd.get("expect");
        try {
            while (got.size() < expect && System.currentTimeMillis() < deadline) {
                for (MessageExt m : c.poll(1000)) got.add(m.getKeys());
            }
        } finally {
            c.shutdown();
        }
        ev.put("keys", new ArrayList<>(got));
    }

    static void report(Map<String, Object> cmd, Map<String, Object> ev) {
        String group = (String) cmd.get("group");
        ev.put("keys", new ArrayList<>(keys.getOrDefault(group, Set.of())));
        ev.put("received", received.getOrDefault(group, new AtomicInteger()).get());
    }
}
