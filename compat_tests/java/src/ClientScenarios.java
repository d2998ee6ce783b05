import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * What a Java user does, one scenario per argument after the name server: prints one JSON line per scenario
 * ({"op": name, ...facts} or {"op": name, "error": ...}). Topics are created by the test beforehand.
 *   sends, pushTags, pushSql, orderly, broadcast, litePull, pullConsumer, delay, retryDlq, transaction,
 *   requestReply, query
 */
public class ClientScenarios {
    static String ns;
    static final long WAIT_MS = 30000;

    public static void main(String[] args) throws Exception {
        ns = args[0];
        for (int i = 1; i < args.length; i++) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("op", args[i]);
            long t0 = System.currentTimeMillis();
            try {
                ev.putAll((Map<String, Object>) ClientScenarios.class.getDeclaredMethod(args[i]).invoke(null));
            } catch (java.lang.reflect.InvocationTargetException e) {
                ev.put("error", String.valueOf(e.getCause()));
            }
            ev.put("ms", System.currentTimeMillis() - t0);
            System.out.println(JSON.toJSONString(ev));
        }
        System.exit(0);
    }

    static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(ns);
        p.setInstanceName(group + System.nanoTime());
        p.start();
        return p;
    }

    static DefaultMQPushConsumer push(String group) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName(group + System.nanoTime());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return c;
    }

    static Message msg(String topic, String tags, String keys, String body) throws Exception {
        return new Message(topic, tags, keys, body.getBytes("UTF-8"));
    }

    static String body(MessageExt m) {
        return new String(m.getBody(), java.nio.charset.StandardCharsets.UTF_8);
    }

    // ------------------------------------------------------------------ sends
    static Map<String, Object> sends() throws Exception {
        Map<String, Object> r = new LinkedHashMap<>();
        DefaultMQProducer p = producer("js_sends_pg");
        try {
            r.put("sync", p.send(msg("JSends", "TagA", "k-sync", "sync")).getSendStatus().name());
            CountDownLatch done = new CountDownLatch(1);
            List<String> async = new CopyOnWriteArrayList<>();
            p.send(msg("JSends", "TagA", "k-async", "async"), new SendCallback() {
                public void onSuccess(SendResult s) { async.add(s.getSendStatus().name()); done.countDown(); }
                public void onException(Throwable e) { async.add("ERR " + e); done.countDown(); }
            });
            done.await(10, TimeUnit.SECONDS);
            r.put("async", async.isEmpty() ? "none" : async.get(0));
            p.sendOneway(msg("JSends", "TagB", "k-oneway", "oneway"));
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < 10; i++) batch.add(msg("JSends", "TagB", "k-batch-" + i, "batch-" + i));
            SendResult b = p.send(batch);
            r.put("batch", b.getSendStatus().name());
            r.put("batchIds", b.getMsgId().split(",").length);
            List<Integer> queues = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                SendResult s = p.send(msg("JSends", "TagC", "k-sel-" + i, "sel-" + i),
                    (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), 2);
                queues.add(s.getMessageQueue().getQueueId());
            }
            r.put("selectorQueues", queues);
        } finally {
            p.shutdown();
        }
        return r;
    }

    /** A started push consumer counting what it receives until ``expect`` bodies arrived (or WAIT_MS). */
    static class Collector {
        final DefaultMQPushConsumer c;
        final Set<String> got = ConcurrentHashMap.newKeySet();
        final AtomicInteger n = new AtomicInteger();
        final CountDownLatch latch;

        Collector(DefaultMQPushConsumer c, int expect) throws Exception {
            this.c = c;
            this.latch = new CountDownLatch(expect);
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) { got.add(body(m)); n.incrementAndGet(); latch.countDown(); }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
        }

        Map<String, Object> finish() throws Exception {
            latch.await(WAIT_MS, TimeUnit.MILLISECONDS);
            Thread.sleep(500);
            c.shutdown();
            Map<String, Object> r = new LinkedHashMap<>();
            List<String> sorted = new ArrayList<>(got);
            Collections.sort(sorted);
            r.put("bodies", sorted);
            r.put("deliveries", n.get());
            return r;
        }
    }

    static Map<String, Object> collect(DefaultMQPushConsumer c, int expect) throws Exception {
        return new Collector(c, expect).finish();
    }

    /** Two groups at once: "TagA || TagC" (sync, async, selector sends) and "TagB" (the oneway send and the batch). */
    static Map<String, Object> pushTags() throws Exception {
        DefaultMQPushConsumer ac = push("js_tags_cg");
        ac.subscribe("JSends", "TagA || TagC");
        DefaultMQPushConsumer bc = push("js_tagb_cg");
        bc.subscribe("JSends", "TagB");
        Collector a = new Collector(ac, 8);
        Collector b = new Collector(bc, 11);
        Map<String, Object> r = a.finish();
        r.put("tagB", b.finish().get("bodies"));
        return r;
    }

    static Map<String, Object> pushSql() throws Exception {
        DefaultMQProducer p = producer("js_sql_pg");
        for (int i = 0; i < 10; i++) {
            Message m = msg("JSql", "T", "k" + i, "sql-" + i);
            m.putUserProperty("a", String.valueOf(i));
            p.send(m);
        }
        p.shutdown();
        DefaultMQPushConsumer c = push("js_sql_cg");
        c.subscribe("JSql", MessageSelector.bySql("a > 6"));
        return collect(c, 3);
    }

    static Map<String, Object> orderly() throws Exception {
        DefaultMQProducer p = producer("js_order_pg");
        for (int step = 0; step < 5; step++) {
            for (int order = 0; order < 4; order++) {
                p.send(msg("JOrder", "T", "o" + order, order + ":" + step),
                    (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), order);
            }
        }
        p.shutdown();
        DefaultMQPushConsumer c = push("js_order_cg");
        c.subscribe("JOrder", "*");
        Map<String, List<Integer>> seq = new ConcurrentHashMap<>();
        CountDownLatch latch = new CountDownLatch(20);
        c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String[] parts = body(m).split(":");
                seq.computeIfAbsent(parts[0], k -> new CopyOnWriteArrayList<>()).add(Integer.parseInt(parts[1]));
                latch.countDown();
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        c.start();
        latch.await(WAIT_MS, TimeUnit.MILLISECONDS);
        c.shutdown();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("sequences", new HashMap<>(seq));
        return r;
    }

    static Map<String, Object> broadcast() throws Exception {
        DefaultMQProducer p = producer("js_bc_pg");
        for (int i = 0; i < 5; i++) p.send(msg("JBroadcast", "T", "b" + i, "bc-" + i));
        p.shutdown();
        List<Map<String, Object>> each = new ArrayList<>();
        List<DefaultMQPushConsumer> cs = new ArrayList<>();
        List<Set<String>> gots = new ArrayList<>();
        CountDownLatch latch = new CountDownLatch(10);
        for (int k = 0; k < 2; k++) {
            DefaultMQPushConsumer c = push("js_bc_cg");
            c.setMessageModel(MessageModel.BROADCASTING);
            c.subscribe("JBroadcast", "*");
            Set<String> got = ConcurrentHashMap.newKeySet();
            gots.add(got);
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) if (got.add(body(m))) latch.countDown();
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            cs.add(c);
        }
        latch.await(WAIT_MS, TimeUnit.MILLISECONDS);
        for (DefaultMQPushConsumer c : cs) c.shutdown();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("perConsumer", new int[] {gots.get(0).size(), gots.get(1).size()});
        return r;
    }

    static Map<String, Object> litePull() throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("js_lite_cg");
        c.setNamesrvAddr(ns);
        c.setAutoCommit(false);
        c.start();
        Map<String, Object> r = new LinkedHashMap<>();
        try {
            List<MessageQueue> mqs = new ArrayList<>(c.fetchMessageQueues("JSends"));
            Collections.sort(mqs);
            MessageQueue q2 = null;
            for (MessageQueue mq : mqs) if (mq.getQueueId() == 2) q2 = mq;
            c.assign(Collections.singletonList(q2));
            // Read the queue to its end first: then the pull task waits in a long poll that brings nothing,
            // and seek() cannot race a pull in flight (4.9.8's PullTaskImpl may still queue what an old pull
            // returns if the new task consumed the seek offset first: a client race, seen once on a fast broker).
            List<Long> before = new ArrayList<>();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (System.currentTimeMillis() < deadline) {
                List<MessageExt> got = c.poll(1000);
                if (got.isEmpty() && !before.isEmpty()) break;
                for (MessageExt m : got) before.add(m.getQueueOffset());
            }
            r.put("beforeSeek", before);
            c.seek(q2, 3);
            List<Long> offs = new ArrayList<>();
            deadline = System.currentTimeMillis() + WAIT_MS;
            while (offs.size() < 3 && System.currentTimeMillis() < deadline) {
                for (MessageExt m : c.poll(1000)) offs.add(m.getQueueOffset());
            }
            r.put("offsetsFrom3", offs.subList(0, Math.min(3, offs.size())));
            r.put("polled", offs);
            c.commitSync();
            r.put("committedAfterCommitSync", c.committed(q2));
            c.seekToBegin(q2);
            List<MessageExt> first = new ArrayList<>();
            deadline = System.currentTimeMillis() + WAIT_MS;
            while (first.isEmpty() && System.currentTimeMillis() < deadline) first.addAll(c.poll(1000));
            r.put("afterSeekToBegin", first.isEmpty() ? -1 : first.get(0).getQueueOffset());
            r.put("committed", c.committed(q2));
        } finally {
            c.shutdown();
        }
        return r;
    }

    static Map<String, Object> pullConsumer() throws Exception {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer("js_pull_cg");
        c.setNamesrvAddr(ns);
        c.start();
        Map<String, Object> r = new LinkedHashMap<>();
        try {
            MessageQueue q = new MessageQueue("JSends", c.fetchSubscribeMessageQueues("JSends").iterator().next()
                .getBrokerName(), 2);
            PullResult pr = c.pullBlockIfNotFound(q, "*", 0, 32);
            r.put("status", pr.getPullStatus().name());
            r.put("found", pr.getPullStatus() == PullStatus.FOUND ? pr.getMsgFoundList().size() : 0);
            r.put("next", pr.getNextBeginOffset());
            r.put("max", pr.getMaxOffset());
            c.updateConsumeOffset(q, pr.getNextBeginOffset());
        } finally {
            c.shutdown();
        }
        return r;
    }

    static Map<String, Object> delay() throws Exception {
        DefaultMQPushConsumer c = push("js_delay_cg");
        c.subscribe("JDelay", "*");
        List<Long> lag = new CopyOnWriteArrayList<>();
        CountDownLatch latch = new CountDownLatch(1);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) { lag.add(System.currentTimeMillis() - m.getBornTimestamp()); latch.countDown(); }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer p = producer("js_delay_pg");
        Message m = msg("JDelay", "T", "d", "delayed");
        m.setDelayTimeLevel(2);
        p.send(m);
        p.shutdown();
        latch.await(WAIT_MS, TimeUnit.MILLISECONDS);
        c.shutdown();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("lagMs", lag.isEmpty() ? -1 : lag.get(0));
        return r;
    }

    static Map<String, Object> retryDlq() throws Exception {
        DefaultMQProducer p = producer("js_retry_pg");
        p.send(msg("JRetry", "T", "r", "retry-me"));
        DefaultMQPushConsumer c = push("js_retry_cg");
        c.subscribe("JRetry", "*");
        c.setMaxReconsumeTimes(2);
        List<Integer> attempts = new CopyOnWriteArrayList<>();
        List<Long> attemptMs = new CopyOnWriteArrayList<>();
        long t0 = System.currentTimeMillis();
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) { attempts.add(m.getReconsumeTimes()); attemptMs.add(System.currentTimeMillis() - t0); }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        c.start();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (attempts.size() < 3 && System.currentTimeMillis() < deadline) Thread.sleep(200);
        Thread.sleep(1500);
        c.shutdown();
        DefaultMQPullConsumer dlq = new DefaultMQPullConsumer("js_dlq_reader");
        dlq.setNamesrvAddr(ns);
        dlq.start();
        long dead = 0;                      // the DLQ is write-only (PERM_WRITE, as Java creates it): count it
        deadline = System.currentTimeMillis() + WAIT_MS;
        while (dead == 0 && System.currentTimeMillis() < deadline) {
            try {
                for (MessageQueue q : dlq.fetchSubscribeMessageQueues("%DLQ%js_retry_cg")) dead += dlq.maxOffset(q);
            } catch (Exception e) {
                Thread.sleep(500);
            }
        }
        dlq.shutdown();
        p.shutdown();
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("attempts", attempts);
        r.put("attemptMs", attemptMs);
        r.put("dlqMessages", dead);
        return r;
    }

    static Map<String, Object> transaction() throws Exception {
        TransactionMQProducer p = new TransactionMQProducer("js_tx_pg");
        p.setNamesrvAddr(ns);
        AtomicInteger checks = new AtomicInteger();
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                return "commit".equals(arg) ? LocalTransactionState.COMMIT_MESSAGE
                    : "rollback".equals(arg) ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
            }
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                checks.incrementAndGet();
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        p.sendMessageInTransaction(msg("JTx", "T", "tx1", "tx-commit"), "commit");
        p.sendMessageInTransaction(msg("JTx", "T", "tx2", "tx-rollback"), "rollback");
        p.sendMessageInTransaction(msg("JTx", "T", "tx3", "tx-checked"), "unknown");
        DefaultMQPushConsumer c = push("js_tx_cg");
        c.subscribe("JTx", "*");
        Map<String, Object> r = collect(c, 2);
        r.put("checks", checks.get());
        p.shutdown();
        return r;
    }

    static Map<String, Object> requestReply() throws Exception {
        DefaultMQProducer replier = producer("js_reply_pg");
        DefaultMQPushConsumer c = push("js_reply_cg");
        c.subscribe("JRequest", "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(m, ("re:" + body(m)).getBytes("UTF-8"));
                    replier.send(reply);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        Thread.sleep(1000);
        DefaultMQProducer p = producer("js_request_pg");
        Map<String, Object> r = new LinkedHashMap<>();
        try {
            Message answer = p.request(msg("JRequest", "T", "q", "ping"), 10000);
            r.put("reply", new String(answer.getBody(), "UTF-8"));
        } finally {
            p.shutdown();
            c.shutdown();
            replier.shutdown();
        }
        return r;
    }

    static Map<String, Object> query() throws Exception {
        DefaultMQProducer p = producer("js_query_pg");
        Map<String, Object> r = new LinkedHashMap<>();
        try {
            long begin = System.currentTimeMillis() - 60000;
            SendResult s = p.send(msg("JQuery", "T", "order-42", "find me"));
            Thread.sleep(1000);
            MessageExt byId = p.viewMessage("JQuery", s.getMsgId());
            r.put("byId", body(byId));
            MessageExt byOffsetId = p.viewMessage(s.getOffsetMsgId());
            r.put("byOffsetId", body(byOffsetId));
            List<String> byKey = new ArrayList<>();
            for (MessageExt m : p.queryMessage("JQuery", "order-42", 32, begin, System.currentTimeMillis() + 60000)
                .getMessageList()) byKey.add(body(m));
            r.put("byKey", byKey);
        } finally {
            p.shutdown();
        }
        return r;
    }
}
