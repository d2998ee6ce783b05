import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Java consumers that come and go while the test acts (rebalancing, restarts, reset offset, broker restart).
 * Args: namesrv. Commands on stdin, one JSON line each answered by one JSON line:
 *   {"cmd":"produce","topic":T,"count":N,"prefix":P}  sync sends (retried for up to 30 s each: broker restarts)
 *   {"cmd":"start","name":C,"group":G,"topic":T}       a push consumer from the first offset
 *   {"cmd":"stop","name":C}                             shutdown (persists its offsets)
 *   {"cmd":"report"}                                    {"op":"report","consumers":{C:{"bodies":[...],"queues":[...]}}}
 */
public class ConsumerLifecycle {
    static String ns;
    static DefaultMQProducer producer;
    static final Map<String, DefaultMQPushConsumer> consumers = new ConcurrentHashMap<>();
    static final Map<String, List<String>> received = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        ns = args[0];
        producer = new DefaultMQProducer("js_lifecycle_pg");
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("lifecycle" + System.nanoTime());
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
                    case "produce": ev.put("failed", produce(cmd)); break;
                    case "start": start(cmd); break;
                    case "stop": consumers.remove((String) cmd.get("name")).shutdown(); break;
                    case "report": ev.put("consumers", report()); break;
                    default: ev.put("error", "unknown command");
                }
            } catch (Exception e) {
                ev.put("error", String.valueOf(e));
            }
            System.out.println(JSON.toJSONString(ev));
            System.out.flush();
        }
        for (DefaultMQPushConsumer c : consumers.values()) c.shutdown();
        producer.shutdown();
        System.exit(0);
    }

    static int produce(Map<String, Object> cmd) throws Exception {
        int failed = 0;
        int count = ((Number) cmd.get("count")).intValue();
        for (int i = 0; i < count; i++) {
            Message m = new Message((String) cmd.get("topic"), "T", cmd.get("prefix") + "-" + i,
                (cmd.get("prefix") + "-" + i).getBytes(StandardCharsets.UTF_8));
            long deadline = System.currentTimeMillis() + 30000;
            while (true) {
                try {
                    producer.send(m);
                    break;
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) { failed++; break; }
                    Thread.sleep(500);
                }
            }
        }
        return failed;
    }

    static void start(Map<String, Object> cmd) throws Exception {
        String name = (String) cmd.get("name");
        DefaultMQPushConsumer c = new DefaultMQPushConsumer((String) cmd.get("group"));
        c.setNamesrvAddr(ns);
        c.setInstanceName(name + System.nanoTime());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe((String) cmd.get("topic"), "*");
        List<String> got = received.computeIfAbsent(name, k -> new CopyOnWriteArrayList<>());
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) got.add(new String(m.getBody(), StandardCharsets.UTF_8));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        consumers.put(name, c);
    }

    static Map<String, Object> report() {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<String, List<String>> e : received.entrySet()) {
            Map<String, Object> one = new LinkedHashMap<>();
            List<String> bodies = new ArrayList<>(e.getValue());
            Collections.sort(bodies);
            one.put("bodies", bodies);
            TreeSet<Integer> queues = new TreeSet<>();
            DefaultMQPushConsumer c = consumers.get(e.getKey());
            if (c != null) {
                for (MessageQueue mq : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
                    if (!mq.getTopic().startsWith("%RETRY%")) queues.add(mq.getQueueId());
                }
            }
            one.put("queues", new ArrayList<>(queues));
            one.put("online", c != null);
            out.put(e.getKey(), one);
        }
        return out;
    }
}
