import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A compaction topic from the Java client.
 *   send namesrv topic keys versions   : keyed sends (key-K, body kK-vV) to queue 0, then one keyless send
 *   read namesrv topic idleMs timeoutMs: DefaultLitePullConsumer assign(all) + seekToBegin, poll until idle;
 *                                        one JSON line per record (the doc's recipe for loading the table)
 */
public class CompactionTable {
    static void emit(Map<String, Object> ev) { System.out.println(JSON.toJSONString(ev)); }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("send")) send(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
        else read(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]));
    }

    static void send(String ns, String topic, int keys, int versions) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("compaction_java_pg");
        p.setNamesrvAddr(ns);
        p.start();
        try {
            MessageQueue q0 = null;
            for (MessageQueue mq : p.fetchPublishMessageQueues(topic)) if (mq.getQueueId() == 0) q0 = mq;
            int ok = 0;
            for (int v = 0; v < versions; v++) {
                for (int k = 0; k < keys; k++) {
                    Message m = new Message(topic, "TagJ", "key-" + k, ("k" + k + "-v" + v).getBytes("UTF-8"));
                    SendResult r = p.send(m, q0);
                    if (r.getSendStatus().name().equals("SEND_OK")) ok++;
                }
            }
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("op", "sent");
            ev.put("ok", ok);
            emit(ev);
            Map<String, Object> err = new LinkedHashMap<>();
            err.put("op", "keyless");
            try {
                p.send(new Message(topic, "TagJ", "no key".getBytes("UTF-8")), q0);
                err.put("code", 0);
            } catch (MQBrokerException e) {
                err.put("code", e.getResponseCode());
                err.put("remark", e.getErrorMessage());
            }
            emit(err);
        } finally {
            p.shutdown();
        }
    }

    static void read(String ns, String topic, long idleMs, long timeoutMs) throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("compaction_java_cg");
        c.setNamesrvAddr(ns);
        c.setAutoCommit(false);
        c.start();
        try {
            Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
            c.assign(new ArrayList<>(mqs));
            for (MessageQueue mq : mqs) c.seekToBegin(mq);
            long deadline = System.currentTimeMillis() + timeoutMs;
            long lastData = System.currentTimeMillis();
            while (System.currentTimeMillis() < deadline && System.currentTimeMillis() - lastData < idleMs) {
                List<MessageExt> got = c.poll(500);
                for (MessageExt m : got) {
                    Map<String, Object> ev = new LinkedHashMap<>();
                    ev.put("op", "recv");
                    ev.put("queueId", m.getQueueId());
                    ev.put("offset", m.getQueueOffset());
                    ev.put("key", m.getKeys());
                    ev.put("body", new String(m.getBody(), "UTF-8"));
                    emit(ev);
                }
                if (!got.isEmpty()) lastData = System.currentTimeMillis();
            }
            Map<String, Object> done = new LinkedHashMap<>();
            done.put("op", "done");
            emit(done);
        } finally {
            c.shutdown();
        }
    }
}
