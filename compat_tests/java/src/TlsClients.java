import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Sends COUNT messages to TOPIC and consumes them with a push consumer, with whatever TLS the JVM is told
 * (-Dtls.enable=true). Client timeouts are 20 s: a cold JVM's first TLS handshake on a loaded machine can take
 * longer than the client's 3 s default. Args: namesrv topic count. Prints {"op":"sent"...}, {"op":"received"...},
 * or {"op":"error","stage":...,"exception":...}.
 */
public class TlsClients {
    static final int TIMEOUT_MS = 20000;

    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        DefaultMQProducer p = new DefaultMQProducer("tls_clients_pg");
        p.setNamesrvAddr(ns);
        p.setMqClientApiTimeout(TIMEOUT_MS);
        p.setSendMsgTimeout(TIMEOUT_MS);
        p.setRetryTimesWhenSendFailed(0);
        int sent = 0;
        try {
            p.start();
            for (int i = 0; i < count; i++) {
                SendResult r = p.send(new Message(topic, "TagA", "k" + i, ("tls-" + i).getBytes(StandardCharsets.UTF_8)));
                if (r.getSendStatus().name().equals("SEND_OK")) {
                    sent++;
                }
            }
        } catch (Exception e) {
            error("send", e);
            p.shutdown();
            System.exit(1);
        }
        p.shutdown();
        event("sent", "n", sent);
        Set<String> got = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(count);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("tls_clients_cg");
        c.setNamesrvAddr(ns);
        c.setMqClientApiTimeout(TIMEOUT_MS);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (got.add(new String(m.getBody(), StandardCharsets.UTF_8))) {
                    all.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            c.start();
            all.await(90, TimeUnit.SECONDS);
        } catch (Exception e) {
            error("consume", e);
        }
        c.shutdown();
        event("received", "n", got.size());
        System.exit(0);
    }

    static void event(String op, String key, Object value) {
        Map<String, Object> ev = new LinkedHashMap<>();
        ev.put("op", op);
        ev.put(key, value);
        System.out.println(JSON.toJSONString(ev));
    }

    static void error(String stage, Throwable e) {
        Map<String, Object> ev = new LinkedHashMap<>();
        ev.put("op", "error");
        ev.put("stage", stage);
        ev.put("exception", e.getClass().getSimpleName());
        Throwable root = e;
        while (root.getCause() != null) {
            root = root.getCause();
        }
        ev.put("root", root.getClass().getSimpleName());
        System.out.println(JSON.toJSONString(ev));
    }
}
