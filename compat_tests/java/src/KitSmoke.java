import com.alibaba.fastjson.JSON;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/** Smallest use of the kit: one sync send, reported as a JSON line. Args: namesrv topic. */
public class KitSmoke {
    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("kit_smoke_pg");
        producer.setNamesrvAddr(args[0]);
        producer.start();
        try {
            SendResult r = producer.send(new Message(args[1], "TagA", "k1", "hello".getBytes("UTF-8")));
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("op", "send");
            ev.put("status", r.getSendStatus().name());
            ev.put("queueOffset", r.getQueueOffset());
            System.out.println(JSON.toJSONString(ev));
        } finally {
            producer.shutdown();
        }
    }
}
