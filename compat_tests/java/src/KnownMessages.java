import com.alibaba.fastjson.JSON;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Sends {@code count} known messages to {@code topic}, message i to queue i % queues, and prints one JSON line
 * per message: what was sent (body base64, keys, tags, property "num") and where the broker put it (queue,
 * queueOffset, msgId, offsetMsgId). Bodies are binary; every 10th is 6 KB so the producer compresses it.
 *   args: nameServer topic count queues
 */
public class KnownMessages {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]), queues = Integer.parseInt(args[3]);
        DefaultMQProducer p = new DefaultMQProducer("known_messages_pg");
        p.setNamesrvAddr(ns);
        p.setInstanceName("known" + System.nanoTime());
        p.start();
        try {
            for (int i = 0; i < count; i++) {
                byte[] body = new byte[i % 10 == 9 ? 6000 : 1 + (i * 37) % 300];
                for (int j = 0; j < body.length; j++) body[j] = (byte) ((i * 31 + j * 7) % 251);
                Message m = new Message(topic, i % 3 == 0 ? "TagA" : "TagB", "key-" + i, body);
                m.putUserProperty("num", Integer.toString(i));
                SendResult r = p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), i % queues);
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("op", "sent");
                ev.put("i", i);
                ev.put("status", r.getSendStatus().name());
                ev.put("queue", r.getMessageQueue().getQueueId());
                ev.put("offset", r.getQueueOffset());
                ev.put("msgId", r.getMsgId());
                ev.put("offsetMsgId", r.getOffsetMsgId());
                ev.put("body", Base64.getEncoder().encodeToString(body));
                ev.put("keys", m.getKeys());
                ev.put("tags", m.getTags());
                System.out.println(JSON.toJSONString(ev));
            }
        } finally {
            p.shutdown();
        }
        System.exit(0);
    }
}
