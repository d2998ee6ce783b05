import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.message.MessageQueueAssignment;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.remoting.protocol.body.ConsumerConnection;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * What a user of the 5.x remoting client does (rocketmq-client 5.5.0): one JSON line per scenario,
 * {"op": name, ...facts} or {"op": name, "error": ...}. Arguments: the name server, the prefix of the topics and
 * groups the test created for it (``<prefix><Scenario>`` topics, ``<prefix><Scenario>Group`` groups; the POP
 * scenario's group is in POP mode, set with mqadmin setConsumeMode), then the scenario names:
 *   pop, batchAck, litePull, assignment, recall, heartbeatV2, resetOffset
 * Facts are what must be the same on any broker: bodies received, answer codes, counts; never times or ids.
 */
public class Remoting5Scenarios {
    static String ns;
    static String prefix;
    static final long WAIT_MS = 30000;
    // generous RPC timeouts: these machines are shared, and a JVM's first requests are slow under load
    static final int RPC_TIMEOUT_MS = 15000;

    public static void main(String[] args) throws Exception {
        ns = args[0];
        prefix = args[1];
        for (int i = 2; i < args.length; i++) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("op", args[i]);
            long t0 = System.currentTimeMillis();
            try {
                @SuppressWarnings("unchecked")
                Map<String, Object> facts = (Map<String, Object>) Remoting5Scenarios.class.getDeclaredMethod(args[i])
                    .invoke(null);
                ev.putAll(facts);
            } catch (java.lang.reflect.InvocationTargetException e) {
                ev.put("error", String.valueOf(e.getCause()));
                List<String> where = new ArrayList<>();
                for (StackTraceElement f : e.getCause().getStackTrace()) {
                    if (f.getClassName().equals(Remoting5Scenarios.class.getName())) {
                        where.add(f.getMethodName() + ":" + f.getLineNumber());
                    }
                }
                ev.put("at", where);
            }
            ev.put("ms", System.currentTimeMillis() - t0);
            System.out.println(JSON.toJSONString(ev));
            System.out.flush();
        }
        System.exit(0);
    }

    // ------------------------------------------------------------------------------------------ helpers
    static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(ns);
        p.setInstanceName(group + System.nanoTime());
        p.setSendMsgTimeout(RPC_TIMEOUT_MS);
        p.setMqClientApiTimeout(RPC_TIMEOUT_MS);
        p.start();
        return p;
    }

    static DefaultMQPushConsumer push(String group, String topic, String expression, List<MessageExt> got)
        throws MQClientException {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName(group + System.nanoTime());
        c.setMqClientApiTimeout(RPC_TIMEOUT_MS);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, expression);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            got.addAll(msgs);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return c;
    }

    static DefaultMQAdminExt admin() throws MQClientException {
        DefaultMQAdminExt a = new DefaultMQAdminExt(RPC_TIMEOUT_MS);
        a.setNamesrvAddr(ns);
        a.setInstanceName("remoting5-admin" + System.nanoTime());
        a.start();
        return a;
    }

    static List<String> send(DefaultMQProducer p, String topic, String stem, int n) throws Exception {
        List<String> bodies = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String body = stem + "-" + i;
            SendResult r = sendTo(p, new Message(topic, "TagA", body.getBytes("UTF-8")), null);
            bodies.add(body + ":" + r.getSendStatus());
        }
        return bodies;
    }

    /** A sync send (to ``mq`` when given), again after a broker's fast failure under load (SYSTEM_BUSY): on these
     * shared machines the Java broker sheds sends that waited 200 ms in its queue. */
    static SendResult sendTo(DefaultMQProducer p, Message m, MessageQueue mq) throws Exception {
        for (int attempt = 0; ; attempt++) {
            try {
                return mq == null ? p.send(m) : p.send(m, mq);
            } catch (MQBrokerException e) {
                if (e.getResponseCode() != 2 || attempt >= 10) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }

    static String body(MessageExt m) {
        return new String(m.getBody(), java.nio.charset.StandardCharsets.UTF_8);
    }

    static List<String> bodies(List<MessageExt> msgs) {
        List<String> out = new ArrayList<>();
        for (MessageExt m : msgs) {
            out.add(body(m));
        }
        Collections.sort(out);
        return out;
    }

    static void waitFor(List<?> got, int n, long ms) throws InterruptedException {
        long end = System.currentTimeMillis() + ms;
        while (got.size() < n && System.currentTimeMillis() < end) {
            Thread.sleep(50);
        }
    }

    static String brokerAddr(MQClientAPIImpl api, String topic) throws Exception {
        TopicRouteData route = api.getTopicRouteInfoFromNameServer(topic, 5000);
        return route.getBrokerDatas().get(0).selectBrokerAddr();
    }

    /** The queues of ``topic`` a push consumer holds now (its rebalance applied; a queue given up is dropped). */
    static int held(DefaultMQPushConsumer c, String topic) {
        int n = 0;
        for (Map.Entry<MessageQueue, org.apache.rocketmq.client.impl.consumer.ProcessQueue> e
            : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().entrySet()) {
            n += e.getKey().getTopic().equals(topic) && !e.getValue().isDropped() ? 1 : 0;
        }
        return n;
    }

    static PopResult pop(MQClientAPIImpl api, String addr, String topic, String group, int max, long invisible)
        throws Exception {
        PopMessageRequestHeader h = new PopMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(-1);
        h.setMaxMsgNums(max);
        h.setInvisibleTime(invisible);
        h.setPollTime(1000);
        h.setBornTime(System.currentTimeMillis());
        h.setInitMode(1);              // ConsumeInitMode.MIN: from the first message
        h.setExpType("TAG");
        h.setExp("*");
        CompletableFuture<PopResult> f = new CompletableFuture<>();
        api.popMessageAsync("broker-a", addr, h, 5000, new PopCallback() {
            public void onSuccess(PopResult r) {
                f.complete(r);
            }

            public void onException(Throwable e) {
                f.completeExceptionally(e);
            }
        });
        return f.get(10, TimeUnit.SECONDS);
    }

    static List<MessageExt> found(PopResult r) {
        return r.getMsgFoundList() == null ? Collections.emptyList() : r.getMsgFoundList();
    }

    // ------------------------------------------------------------------------------------------ scenarios
    /** A push consumer of a group in POP mode (mqadmin setConsumeMode), assignment left to the broker. */
    static Map<String, Object> pop() throws Exception {
        String topic = prefix + "Pop";
        DefaultMQProducer p = producer(prefix + "PopPG");
        List<String> sent = send(p, topic, "pop", 6);
        List<MessageExt> got = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c = push(topic + "Group", topic, "*", got);
        c.setClientRebalance(false);
        c.start();
        waitFor(got, 6, WAIT_MS);
        Thread.sleep(1500);                               // anything delivered twice shows now
        c.shutdown();
        p.shutdown();
        int popped = 0;
        for (MessageExt m : got) {
            popped += m.getProperty(MessageConst.PROPERTY_POP_CK) != null ? 1 : 0;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", sent);
        out.put("received", bodies(got));
        out.put("receivedByPop", popped);
        return out;
    }

    /** POP through the client API, three of four acked with one BATCH_ACK_MESSAGE: only the fourth comes back. */
    static Map<String, Object> batchAck() throws Exception {
        String topic = prefix + "BatchAck", group = topic + "Group";
        DefaultMQProducer p = producer(prefix + "BatchAckPG");
        send(p, topic, "ba", 4);
        MQClientInstance inst = p.getDefaultMQProducerImpl().getMqClientFactory();
        MQClientAPIImpl api = inst.getMQClientAPIImpl();
        String addr = brokerAddr(api, topic);
        List<MessageExt> first = new ArrayList<>();
        long end = System.currentTimeMillis() + WAIT_MS;
        while (first.size() < 4 && System.currentTimeMillis() < end) {
            first.addAll(found(pop(api, addr, topic, group, 32, 4000)));
        }
        Collections.sort(first, (a, b) -> body(a).compareTo(body(b)));
        List<String> extraInfos = new ArrayList<>();
        for (MessageExt m : first.subList(0, Math.min(3, first.size()))) {
            extraInfos.add(m.getProperty(MessageConst.PROPERTY_POP_CK));
        }
        CompletableFuture<AckResult> acked = new CompletableFuture<>();
        api.batchAckMessageAsync(addr, 5000, new AckCallback() {
            public void onSuccess(AckResult r) {
                acked.complete(r);
            }

            public void onException(Throwable e) {
                acked.completeExceptionally(e);
            }
        }, topic, group, extraInfos);
        AckResult ack = acked.get(10, TimeUnit.SECONDS);
        List<String> again = new ArrayList<>();
        end = System.currentTimeMillis() + WAIT_MS;
        while (again.isEmpty() && System.currentTimeMillis() < end) {
            for (MessageExt m : found(pop(api, addr, topic, group, 32, 60000))) {
                again.add(body(m) + ":" + m.getReconsumeTimes());
            }
        }
        Thread.sleep(1000);
        for (MessageExt m : found(pop(api, addr, topic, group, 32, 60000))) {   // nothing else may come back
            again.add(body(m) + ":" + m.getReconsumeTimes());
        }
        p.shutdown();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("firstPop", bodies(first));
        out.put("batchAck", String.valueOf(ack.getStatus()));
        out.put("afterInvisibleTime", again);
        return out;
    }

    /** DefaultLitePullConsumer (LITE_PULL_MESSAGE): poll everything, commit, read the committed offsets. */
    static Map<String, Object> litePull() throws Exception {
        String topic = prefix + "LitePull";
        DefaultMQProducer p = producer(prefix + "LitePullPG");
        send(p, topic, "lp", 8);
        p.shutdown();
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(topic + "Group");
        c.setNamesrvAddr(ns);
        c.setInstanceName(topic + System.nanoTime());
        c.setMqClientApiTimeout(RPC_TIMEOUT_MS);
        c.setAutoCommit(false);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.start();
        List<MessageExt> got = new ArrayList<>();
        long end = System.currentTimeMillis() + WAIT_MS;
        while (got.size() < 8 && System.currentTimeMillis() < end) {
            got.addAll(c.poll(1000));
        }
        c.commitSync();
        long committed = 0;
        for (MessageQueue mq : c.fetchMessageQueues(topic)) {
            committed += Math.max(0, c.committed(mq));
        }
        c.shutdown();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("received", bodies(got));
        out.put("committedTotal", committed);
        return out;
    }

    /** Server-side assignment: two push consumers with clientRebalance off share the queues the broker hands
     * out (QUERY_ASSIGNMENT); a group switched to POP (SET_MESSAGE_REQUEST_MODE) gets queue -1 in POP mode. */
    static Map<String, Object> assignment() throws Exception {
        String topic = prefix + "Assign", group = topic + "Group";
        List<MessageExt> got1 = new CopyOnWriteArrayList<>(), got2 = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c1 = push(group, topic, "*", got1), c2 = push(group, topic, "*", got2);
        c1.setClientRebalance(false);
        c2.setClientRebalance(false);
        c1.start();
        c2.start();
        MQClientInstance inst = c1.getDefaultMQPushConsumerImpl().getmQClientFactory();
        MQClientAPIImpl api = inst.getMQClientAPIImpl();
        String addr = brokerAddr(api, topic);
        List<Integer> sizes = new ArrayList<>();
        long end = System.currentTimeMillis() + WAIT_MS;
        while (System.currentTimeMillis() < end) {            // until the broker sees both consumers
            sizes.clear();
            for (DefaultMQPushConsumer c : List.of(c1, c2)) {
                String cid = c.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId();
                Set<MessageQueueAssignment> a = api.queryAssignment(addr, topic, group, cid, "AVG",
                    MessageModel.CLUSTERING, 5000);
                sizes.add(a == null ? -1 : a.size());
            }
            if (sizes.get(0) + sizes.get(1) == 4 && sizes.get(0) > 0 && sizes.get(1) > 0
                && held(c1, topic) == sizes.get(0) && held(c2, topic) == sizes.get(1)) {   // and both applied it
                break;
            }
            Thread.sleep(200);
        }
        Collections.sort(sizes);
        DefaultMQProducer p = producer(prefix + "AssignPG");
        List<String> sent = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            MessageQueue mq = new MessageQueue(topic, "broker-a", i % 4);
            sendTo(p, new Message(topic, ("as-" + i).getBytes("UTF-8")), mq);
            sent.add("as-" + i);
        }
        List<MessageExt> all = new CopyOnWriteArrayList<>();
        end = System.currentTimeMillis() + WAIT_MS;
        while (got1.size() + got2.size() < 8 && System.currentTimeMillis() < end) {
            Thread.sleep(50);
        }
        Thread.sleep(1000);
        all.addAll(got1);
        all.addAll(got2);
        String popGroup = topic + "PopGroup";
        api.setMessageRequestMode(addr, topic, popGroup, MessageRequestMode.POP, 0, 5000);
        DefaultMQPushConsumer c3 = push(popGroup, topic, "*", new CopyOnWriteArrayList<>());
        c3.setClientRebalance(false);
        c3.start();
        String cid3 = c3.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId();
        List<String> pop = new ArrayList<>();
        end = System.currentTimeMillis() + WAIT_MS;
        while (pop.isEmpty() && System.currentTimeMillis() < end) {     // until the broker sees the consumer
            Set<MessageQueueAssignment> popAssigned = api.queryAssignment(addr, topic, popGroup, cid3, "AVG",
                MessageModel.CLUSTERING, 5000);
            for (MessageQueueAssignment a : popAssigned == null ? Set.<MessageQueueAssignment>of() : popAssigned) {
                pop.add(a.getMessageQueue().getQueueId() + ":" + a.getMode());
            }
            Thread.sleep(pop.isEmpty() ? 200 : 0);
        }
        c3.shutdown();
        String retryRefused;
        try {
            api.setMessageRequestMode(addr, "%RETRY%" + group, group, MessageRequestMode.POP, 0, 5000);
            retryRefused = "accepted";
        } catch (MQClientException e) {
            retryRefused = "refused " + e.getResponseCode();
        }
        c1.shutdown();
        c2.shutdown();
        p.shutdown();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("assignedSizes", sizes);
        out.put("eachConsumed", !got1.isEmpty() && !got2.isEmpty());
        out.put("received", bodies(all));
        out.put("popModeAssignment", pop);
        out.put("retryTopicMode", retryRefused);
        return out;
    }

    /** Recall: a timer message sent with a recall handle, recalled before its time, is never delivered; the one
     * kept is; plain and delay-level sends get no handle; a second recall after the time is refused. */
    static Map<String, Object> recall() throws Exception {
        String topic = prefix + "Recall";
        List<MessageExt> got = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c = push(topic + "Group", topic, "*", got);
        c.start();
        DefaultMQProducer p = producer(prefix + "RecallPG");
        long due = System.currentTimeMillis() + 5000;
        Message gone = new Message(topic, "recall-me".getBytes("UTF-8"));
        gone.setDeliverTimeMs(due);
        SendResult goneSent = sendTo(p, gone, null);
        Message kept = new Message(topic, "keep-me".getBytes("UTF-8"));
        kept.setDeliverTimeMs(due);
        SendResult keptSent = sendTo(p, kept, null);
        Message level = new Message(topic, "level".getBytes("UTF-8"));
        level.setDelayTimeLevel(1);
        SendResult levelSent = sendTo(p, level, null);
        SendResult plainSent = sendTo(p, new Message(topic, "plain".getBytes("UTF-8")), null);
        String recalledId = p.recallMessage(topic, goneSent.getRecallHandle());
        long end = System.currentTimeMillis() + WAIT_MS;        // until the kept one (due with the recalled one)
        while (System.currentTimeMillis() < end && !bodies(got).contains("keep-me")) {
            Thread.sleep(100);
        }
        Thread.sleep(2000);                                      // the recalled one would be there by now
        c.shutdown();
        String late = refusal(() -> p.recallMessage(topic, keptSent.getRecallHandle()));
        String garbage = refusal(() -> p.recallMessage(topic, "bm90IGEgaGFuZGxl"));
        p.shutdown();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("timerHandles", goneSent.getRecallHandle() != null && keptSent.getRecallHandle() != null);
        out.put("levelHandle", String.valueOf(levelSent.getRecallHandle()));
        out.put("plainHandle", String.valueOf(plainSent.getRecallHandle()));
        out.put("recalledIdIsTheMessageId", goneSent.getMsgId().equals(recalledId));
        out.put("received", bodies(got));
        out.put("recallAfterTheTime", late);
        out.put("recallOfGarbage", garbage);
        return out;
    }

    interface Call {
        Object call() throws Exception;
    }

    static String refusal(Call call) {
        try {
            call.call();
            return "accepted";
        } catch (MQBrokerException e) {
            return e.getResponseCode() + " " + e.getErrorMessage();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    /** Heartbeat v2: after the first heartbeat the consumer's heartbeats leave its subscription out; the broker
     * keeps it, so the tag filter still holds and mqadmin still sees it. */
    static Map<String, Object> heartbeatV2() throws Exception {
        String topic = prefix + "HbV2", group = topic + "Group";
        List<MessageExt> got = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c = push(group, topic, "TagA", got);
        c.setUseHeartbeatV2(true);
        c.setHeartbeatBrokerInterval(500);
        c.start();
        DefaultMQAdminExt admin = admin();
        int resent = brokerHoldsTheRebalancedSubVersion(c, admin, topic, group);
        if (resent > 0) {
            System.err.println("heartbeatV2: the client lost its rebalance heartbeat; sent again " + resent + "x");
        }
        Thread.sleep(3000);                                // several heartbeats without the subscription
        DefaultMQProducer p = producer(prefix + "HbV2PG");
        sendTo(p, new Message(topic, "TagA", "hb-a".getBytes("UTF-8")), null);
        sendTo(p, new Message(topic, "TagB", "hb-b".getBytes("UTF-8")), null);
        sendTo(p, new Message(topic, "TagA", "hb-c".getBytes("UTF-8")), null);
        waitFor(got, 2, WAIT_MS);
        Thread.sleep(1000);
        ConsumerConnection cc = admin.examineConsumerConnectionInfo(group);
        Map<String, String> subs = new TreeMap<>();
        for (Map.Entry<String, SubscriptionData> e : cc.getSubscriptionTable().entrySet()) {
            subs.put(e.getKey(), e.getValue().getSubString());
        }
        admin.shutdown();
        c.shutdown();
        p.shutdown();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("received", bodies(got));
        out.put("subscriptions", subs);
        out.put("connections", cc.getConnectionSet().size());
        return out;
    }

    /** Waits until the consumer has its queues and the broker holds the subVersion its rebalance set. The 5.5.0
     * client sends that subVersion with a heartbeat it skips when its periodic heartbeat holds the lock (tryLock),
     * and its fingerprint leaves subVersion out, so its later heartbeats carry no subscriptions: a Java broker then
     * refuses its pulls SUBSCRIPTION_NOT_LATEST for good (rmqd asks for the subscriptions again, IS_SUB_CHANGE).
     * A client bug, not what the scenario looks at: after 5 s the heartbeat is sent again as the rebalance would
     * have. Returns how many times. */
    static int brokerHoldsTheRebalancedSubVersion(DefaultMQPushConsumer c, DefaultMQAdminExt admin, String topic,
                                                  String group) throws Exception {
        long end = System.currentTimeMillis() + WAIT_MS;
        while (c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().size() < 4) {
            if (System.currentTimeMillis() > end) {
                throw new IllegalStateException("the consumer got no queues");
            }
            Thread.sleep(100);
        }
        long settled = System.currentTimeMillis() + 5000;
        int resent = 0;
        while (true) {
            long mine = c.getDefaultMQPushConsumerImpl().getSubscriptionInner().get(topic).getSubVersion();
            SubscriptionData held = admin.examineConsumerConnectionInfo(group).getSubscriptionTable().get(topic);
            if (held != null && held.getSubVersion() >= mine) {
                return resent;
            }
            if (System.currentTimeMillis() > end) {
                throw new IllegalStateException("the broker never held subVersion " + mine);
            }
            if (System.currentTimeMillis() > settled) {
                c.getDefaultMQPushConsumerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLockV2(true);
                resent++;
            }
            Thread.sleep(200);
        }
    }

    /** Server-side offset reset (5.x useServerSideResetOffset): resetOffsetByTime to the start while a push
     * consumer runs; its next pulls start over, and it consumes everything again. */
    static Map<String, Object> resetOffset() throws Exception {
        String topic = prefix + "Reset", group = topic + "Group";
        DefaultMQProducer p = producer(prefix + "ResetPG");
        long start = System.currentTimeMillis() - 1000;
        send(p, topic, "rs", 4);
        List<MessageExt> got = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c = push(group, topic, "*", got);
        c.start();
        waitFor(got, 4, WAIT_MS);
        Thread.sleep(1000);
        int before = got.size();
        DefaultMQAdminExt admin = admin();
        Map<MessageQueue, Long> table = admin.resetOffsetByTimestamp(topic, group, start, true);
        long total = 0;
        for (Long v : table.values()) {
            total += v;
        }
        for (int q = 0; q < 4; q++) {                         // wakes the held pulls of every queue
            sendTo(p, new Message(topic, ("wake-" + q).getBytes("UTF-8")), new MessageQueue(topic, "broker-a", q));
        }
        long end = System.currentTimeMillis() + WAIT_MS;
        while (System.currentTimeMillis() < end) {
            Set<String> seen = new TreeSet<>();
            int originals = 0;
            for (MessageExt m : got) {
                if (body(m).startsWith("rs-")) {
                    originals++;
                }
                seen.add(body(m));
            }
            if (originals >= 8 && seen.size() >= 8) {
                break;
            }
            Thread.sleep(100);
        }
        Thread.sleep(500);
        c.shutdown();
        admin.shutdown();
        p.shutdown();
        Map<String, Integer> counts = new TreeMap<>();
        for (MessageExt m : got) {
            counts.merge(body(m), 1, Integer::sum);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("beforeReset", before);
        out.put("resetQueues", table.size());
        out.put("resetOffsetsTotal", total);
        out.put("timesReceived", counts);
        return out;
    }
}
