import com.alibaba.fastjson.JSON;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * ACL matrix probe: runs each operation with the given credentials (AclClientRPCHook) and prints one JSON
 * line per operation: {"op":..., "ok":true} or {"op":..., "ok":false, "code":N, "error":"..."}.
 * Args: namesrv accessKey|- secretKey|- op... where op is send:TOPIC or pull:TOPIC:GROUP.
 */
public class AclProbe {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        RPCHook hook = "-".equals(args[1]) ? null : new AclClientRPCHook(new SessionCredentials(args[1], args[2]));
        DefaultMQProducer producer = new DefaultMQProducer("acl_probe_pg", hook);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(5000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            for (int i = 3; i < args.length; i++) {
                String[] op = args[i].split(":");
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("op", args[i]);
                try {
                    if ("send".equals(op[0])) {
                        SendResult r = producer.send(new Message(op[1], "TagA", ("acl " + i).getBytes("UTF-8")));
                        ev.put("ok", r.getSendStatus().name().equals("SEND_OK"));
                    } else {
                        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(op[2], hook);
                        consumer.setNamesrvAddr(namesrv);
                        consumer.setInstanceName("acl-probe-" + i);
                        consumer.start();
                        try {
                            Set<MessageQueue> mqs = consumer.fetchSubscribeMessageQueues(op[1]);
                            MessageQueue mq = mqs.iterator().next();
                            PullResult r = consumer.pull(new MessageQueue(op[1], mq.getBrokerName(), 0), "*", 0, 4);
                            ev.put("ok", true);
                            ev.put("status", r.getPullStatus().name());
                        } finally {
                            consumer.shutdown();
                        }
                    }
                } catch (MQBrokerException e) {
                    ev.put("ok", false);
                    ev.put("code", e.getResponseCode());
                    ev.put("error", e.getErrorMessage());
                } catch (MQClientException e) {
                    ev.put("ok", false);
                    if (e.getCause() instanceof MQBrokerException) {   // the producer's retry wrapper
                        MQBrokerException b = (MQBrokerException) e.getCause();
                        ev.put("code", b.getResponseCode());
                        ev.put("error", b.getErrorMessage());
                    } else {
                        ev.put("code", e.getResponseCode());
                        ev.put("error", e.getErrorMessage());
                    }
                }
                System.out.println(JSON.toJSONString(ev));
            }
        } finally {
            producer.shutdown();
        }
    }
}
