import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * The benchmark producer's load (sync sends of one body size from N threads, as bench-producer -w N -s SIZE)
 * with every send's round trip kept, for percentiles: bench-producer prints only the average and the max.
 * After a warm-up it measures for the given seconds and prints one JSON line: sends per second, p50/p90/p99/
 * p99.9/max in ms, and the count of each SendStatus and of failures.
 *   args: nameServer topic threads bodySize warmupSeconds seconds
 */
public class SendLatency {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1];
        int threads = Integer.parseInt(args[2]), size = Integer.parseInt(args[3]);
        long warmupMs = Long.parseLong(args[4]) * 1000, runMs = Long.parseLong(args[5]) * 1000;
        DefaultMQProducer p = new DefaultMQProducer("send_latency_pg");
        p.setNamesrvAddr(ns);
        p.setInstanceName("latency" + System.nanoTime());
        p.start();
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        long start = System.currentTimeMillis(), measureFrom = start + warmupMs, end = measureFrom + runMs;
        Map<String, AtomicInteger> statuses = new ConcurrentHashMap<>();
        AtomicInteger failed = new AtomicInteger();
        List<long[]> perThread = new ArrayList<>();
        List<int[]> counts = new ArrayList<>();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            long[] rts = new long[1 << 17];
            int[] n = new int[1];
            perThread.add(rts);
            counts.add(n);
            Thread th = new Thread(() -> {
                while (true) {
                    long now = System.currentTimeMillis();
                    if (now >= end) return;
                    long t0 = System.nanoTime();
                    try {
                        SendResult r = p.send(new Message(topic, body));
                        long rt = System.nanoTime() - t0;
                        if (now >= measureFrom) {
                            statuses.computeIfAbsent(r.getSendStatus().name(), k -> new AtomicInteger()).incrementAndGet();
                            if (n[0] < rts.length) rts[n[0]++] = rt;
                        }
                    } catch (Exception e) {
                        if (now >= measureFrom) failed.incrementAndGet();
                    }
                }
            });
            th.start();
            ts.add(th);
        }
        for (Thread th : ts) th.join();
        int total = 0;
        for (int[] n : counts) total += n[0];
        long[] all = new long[total];
        int k = 0;
        for (int t = 0; t < threads; t++) {
            System.arraycopy(perThread.get(t), 0, all, k, counts.get(t)[0]);
            k += counts.get(t)[0];
        }
        Arrays.sort(all);
        Map<String, Object> ev = new LinkedHashMap<>();
        ev.put("op", "latency");
        ev.put("tps", total * 1000.0 / runMs);
        for (double q : new double[]{0.5, 0.9, 0.99, 0.999}) {
            ev.put("p" + (q * 100 == Math.floor(q * 100) ? String.valueOf((int) (q * 100)) : String.valueOf(q * 100)),
                   total == 0 ? 0 : all[Math.min(total - 1, (int) Math.ceil(q * total) - 1)] / 1e6);
        }
        ev.put("max", total == 0 ? 0 : all[total - 1] / 1e6);
        ev.put("statuses", statuses);
        ev.put("failed", failed.get());
        System.out.println(JSON.toJSONString(ev));
        p.shutdown();
        System.exit(0);
    }
}
