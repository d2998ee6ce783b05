import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.body.UserInfo;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Access control 2.0 matrix probe with the 5.x remoting client: each stdin line is a JSON array
 * [accessKey|-, secretKey|-, op...] run with AclClientRPCHook(SessionCredentials) of 5.x (or unsigned for "-"), each
 * op printing {"op":..., "ok":true|false, "code":N, "error":"..."}; then {"end":N}. Ops:
 * send:TOPIC (SEND_MESSAGE_V2), pull:TOPIC:GROUP (PULL_MESSAGE on queue 0), offset:TOPIC:GROUP
 * (QUERY_CONSUMER_OFFSET of queue 0), maxoffset:TOPIC (GET_MAX_OFFSET of queue 0), create:TOPIC
 * (UPDATE_AND_CREATE_TOPIC on the broker), getuser:USER (AUTH_GET_USER on the broker). Args: namesrv brokerAddr.
 */
public class Auth5Probe {
    static int probes = 0;

    static void probe(String namesrv, String broker, String ak, String sk, List<String> ops) throws Exception {
        int n = ++probes;
        RPCHook hook = "-".equals(ak) ? null : new AclClientRPCHook(new SessionCredentials(ak, sk));
        DefaultMQProducer producer = new DefaultMQProducer("auth_probe_pg", hook);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("auth-probe-" + n);
        producer.setSendMsgTimeout(5000);
        producer.setRetryTimesWhenSendFailed(0);
        DefaultMQAdminExt admin = new DefaultMQAdminExt(hook, 5000);
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("auth-probe-admin-" + n);
        boolean producerStarted = false, adminStarted = false;
        try {
            for (int i = 0; i < ops.size(); i++) {
                String[] op = ops.get(i).split(":");
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("op", ops.get(i));
                try {
                    switch (op[0]) {
                        case "send": {
                            if (!producerStarted) {
                                producer.start();
                                producerStarted = true;
                            }
                            SendResult r = producer.send(new Message(op[1], "TagA", ("auth " + i).getBytes("UTF-8")));
                            ev.put("ok", r.getSendStatus().name().equals("SEND_OK"));
                            break;
                        }
                        case "offset": {
                            DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(op[2], hook);
                            consumer.setNamesrvAddr(namesrv);
                            consumer.setInstanceName("auth-probe-" + n + "-" + i);
                            consumer.start();
                            try {
                                MessageQueue mq = consumer.fetchSubscribeMessageQueues(op[1]).iterator().next();
                                ev.put("offset", consumer.fetchConsumeOffset(
                                    new MessageQueue(op[1], mq.getBrokerName(), 0), true));
                                ev.put("ok", true);
                            } finally {
                                consumer.shutdown();
                            }
                            break;
                        }
                        case "pull": {
                            DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(op[2], hook);
                            consumer.setNamesrvAddr(namesrv);
                            consumer.setInstanceName("auth-probe-" + n + "-" + i);
                            consumer.start();
                            try {
                                MessageQueue mq = consumer.fetchSubscribeMessageQueues(op[1]).iterator().next();
                                PullResult r = consumer.pull(new MessageQueue(op[1], mq.getBrokerName(), 0), "*", 0, 4);
                                ev.put("ok", true);
                                ev.put("status", r.getPullStatus().name());
                            } finally {
                                consumer.shutdown();
                            }
                            break;
                        }
                        default: {
                            if (!adminStarted) {
                                admin.start();
                                adminStarted = true;
                            }
                            if ("maxoffset".equals(op[0])) {
                                String brokerName = admin.examineTopicRouteInfo(op[1]).getBrokerDatas().get(0)
                                    .getBrokerName();
                                ev.put("offset", admin.maxOffset(new MessageQueue(op[1], brokerName, 0)));
                            } else if ("create".equals(op[0])) {
                                TopicConfig tc = new TopicConfig(op[1], 1, 1);
                                admin.createAndUpdateTopicConfig(broker, tc);
                            } else if ("getuser".equals(op[0])) {
                                UserInfo u = admin.getUser(broker, op[1]);
                                ev.put("user", u == null ? null : u.getUsername());
                            } else {
                                throw new IllegalArgumentException("unknown op " + op[0]);
                            }
                            ev.put("ok", true);
                        }
                    }
                } catch (MQBrokerException e) {
                    ev.put("ok", false);
                    ev.put("code", e.getResponseCode());
                    ev.put("error", e.getErrorMessage());
                } catch (MQClientException e) {
                    ev.put("ok", false);
                    Throwable c = e.getCause();
                    if (c instanceof MQBrokerException) {
                        ev.put("code", ((MQBrokerException) c).getResponseCode());
                        ev.put("error", ((MQBrokerException) c).getErrorMessage());
                    } else {
                        ev.put("code", e.getResponseCode());
                        ev.put("error", e.getErrorMessage());
                    }
                } catch (Exception e) {
                    ev.put("ok", false);
                    ev.put("code", -1);
                    ev.put("error", e.getClass().getSimpleName());
                }
                System.out.println(JSON.toJSONString(ev));
            }
        } finally {
            if (producerStarted) {
                producer.shutdown();
            }
            if (adminStarted) {
                admin.shutdown();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], broker = args[1];
        System.out.println("{\"ready\":true}");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().isEmpty()) {
                continue;
            }
            List<String> words = JSON.parseArray(line, String.class);
            probe(namesrv, broker, words.get(0), words.get(1), words.subList(2, words.size()));
            System.out.println("{\"end\":" + probes + "}");
        }
    }
}
