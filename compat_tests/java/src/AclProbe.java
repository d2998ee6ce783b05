import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
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
 * Or: namesrv --stdin, then each stdin line is a JSON array [accessKey|-, secretKey|-, op...] run the same way
 * (its own producer and consumers, in client instances of their own: MQClientInstance keeps the RPC hook it was
 * made with), followed by {"end":N} (N: the line's number from 1); the program ends when stdin closes. One JVM
 * for many probes: a JVM start costs seconds on a busy machine.
 */
public class AclProbe {
    static int probes = 0;

    static void probe(String namesrv, String ak, String sk, List<String> ops) throws Exception {
        int n = ++probes;
        RPCHook hook = "-".equals(ak) ? null : new AclClientRPCHook(new SessionCredentials(ak, sk));
        DefaultMQProducer producer = new DefaultMQProducer("acl_probe_pg", hook);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("acl-probe-" + n);
        producer.setSendMsgTimeout(5000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            for (int i = 0; i < ops.size(); i++) {
                String[] op = ops.get(i).split(":");
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("op", ops.get(i));
                try {
                    if ("send".equals(op[0])) {
                        SendResult r = producer.send(new Message(op[1], "TagA", ("acl " + i).getBytes("UTF-8")));
                        ev.put("ok", r.getSendStatus().name().equals("SEND_OK"));
                    } else {
                        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(op[2], hook);
                        consumer.setNamesrvAddr(namesrv);
                        consumer.setInstanceName("acl-probe-" + n + "-" + i);
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

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        if (args.length == 2 && "--stdin".equals(args[1])) {
            System.out.println("{\"ready\":true}");
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().isEmpty()) continue;
                List<String> words = JSON.parseArray(line, String.class);
                probe(namesrv, words.get(0), words.get(1), words.subList(2, words.size()));
                System.out.println("{\"end\":" + probes + "}");
            }
            return;
        }
        probe(namesrv, args[1], args[2], java.util.Arrays.asList(args).subList(3, args.length));
    }
}
