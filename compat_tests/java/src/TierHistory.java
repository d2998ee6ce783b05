import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * History across the local store and the tier, from the Java client.
 *   send namesrv topic count         : keyed sends ("order-I shared-key"), one JSON line per send result
 *   read namesrv topic idleMs timeoutMs timestamp [ends]
 *                                    : DefaultLitePullConsumer assign(all) + seekToBegin, poll until idle, one
 *                                      line per record; then offsetForTimestamp(queue, timestamp) per queue.
 *                                      ends ("queueId=offset,..."): once every listed queue delivered the record
 *                                      before its end, idle means 1 s (it then polls at the end of every queue)
 */
public class TierHistory {
    static void emit(Map<String, Object> ev) { System.out.println(JSON.toJSONString(ev)); }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("send")) send(args[1], args[2], Integer.parseInt(args[3]));
        else read(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]), Long.parseLong(args[5]),
                  args.length > 6 ? args[6] : "");
    }

    static void send(String ns, String topic, int count) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("tier_java_pg");
        p.setNamesrvAddr(ns);
        p.start();
        try {
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, "TagT", "order-" + i + " shared-key", ("java-" + i).getBytes("UTF-8"));
                SendResult r = p.send(m);
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("op", "sent");
                ev.put("i", i);
                ev.put("status", r.getSendStatus().name());
                ev.put("msgId", r.getMsgId());
                ev.put("offsetMsgId", r.getOffsetMsgId());
                ev.put("queueId", r.getMessageQueue().getQueueId());
                ev.put("offset", r.getQueueOffset());
                emit(ev);
            }
        } finally {
            p.shutdown();
        }
    }

    static void read(String ns, String topic, long idleMs, long timeoutMs, long timestamp, String ends) throws Exception {
        Map<Integer, Long> waiting = new LinkedHashMap<>();      // queueId -> end offset not yet reached
        for (String e : ends.split(",")) {
            if (e.isEmpty()) continue;
            String[] kv = e.split("=");
            waiting.put(Integer.parseInt(kv[0]), Long.parseLong(kv[1]));
        }
        boolean bounded = !waiting.isEmpty();
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("tier_java_cg");
        c.setNamesrvAddr(ns);
        c.setAutoCommit(false);
        c.start();
        try {
            Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
            c.assign(new ArrayList<>(mqs));
            for (MessageQueue mq : mqs) c.seekToBegin(mq);
            long deadline = System.currentTimeMillis() + timeoutMs;
            long lastData = System.currentTimeMillis();
            while (System.currentTimeMillis() < deadline
                   && System.currentTimeMillis() - lastData < (bounded && waiting.isEmpty() ? 1000 : idleMs)) {
                List<MessageExt> got = c.poll(500);
                for (MessageExt m : got) {
                    Map<String, Object> ev = new LinkedHashMap<>();
                    ev.put("op", "recv");
                    ev.put("queueId", m.getQueueId());
                    ev.put("offset", m.getQueueOffset());
                    ev.put("msgId", m.getMsgId());
                    ev.put("uniqKey", m.getProperty("UNIQ_KEY"));
                    ev.put("commitLogOffset", m.getCommitLogOffset());
                    ev.put("body", new String(m.getBody(), "UTF-8"));
                    ev.put("storeTimestamp", m.getStoreTimestamp());
                    emit(ev);
                    Long end = waiting.get(m.getQueueId());
                    if (end != null && m.getQueueOffset() + 1 >= end) waiting.remove(m.getQueueId());
                }
                if (!got.isEmpty()) lastData = System.currentTimeMillis();
            }
            for (MessageQueue mq : mqs) {
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("op", "offsetForTimestamp");
                ev.put("queueId", mq.getQueueId());
                ev.put("offset", c.offsetForTimestamp(mq, timestamp));
                emit(ev);
            }
            Map<String, Object> done = new LinkedHashMap<>();
            done.put("op", "done");
            emit(done);
        } finally {
            c.shutdown();
        }
    }
}
