import com.alibaba.fastjson.JSON;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A live producer and push consumer for the console tests (connections, running info, resend).
 * Args: namesrv topic consumerGroup producerGroup seconds.  Prints {"op":"started"} once both run,
 * {"op":"recv",...} per message consumed; exits after `seconds` or when stdin closes.
 */
public class ConsoleClients {
    static synchronized void emit(Map<String, Object> ev) {
        System.out.println(JSON.toJSONString(ev));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args[3]);
        producer.setNamesrvAddr(args[0]);
        producer.start();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[2]);
        consumer.setNamesrvAddr(args[0]);
        consumer.subscribe(args[1], "*");
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("op", "recv");
                ev.put("msgId", m.getMsgId());
                ev.put("body", new String(m.getBody(), java.nio.charset.StandardCharsets.UTF_8));
                emit(ev);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        // producer and consumer share one client instance: one heartbeat registers both
        consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        Map<String, Object> ev = new LinkedHashMap<>();
        ev.put("op", "started");
        ev.put("clientId", consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId());
        emit(ev);
        long end = System.currentTimeMillis() + Long.parseLong(args[4]) * 1000L;
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (Exception ignored) { }
        });
        stdin.setDaemon(true);
        stdin.start();
        while (System.currentTimeMillis() < end && stdin.isAlive()) {
            Thread.sleep(100);
        }
        consumer.shutdown();
        producer.shutdown();
    }
}
