import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * An unmodified 4.9.8 producer sending through a master failover (tests/failover). Args: namesrv topic threads.
 * Sync sends in a loop (each thread about 200 per second) until stdin closes; every send answered SEND_OK prints
 * {"op":"ok","key":K,"t":epochMillis,"broker":brokerName}, every failure {"op":"fail","t":..,"error":..} (at most
 * one per thread per 100 ms). The route is polled every 500 ms (pollNameServerInterval; the 30 s default would
 * keep it on the dead master for up to 30 s).
 */
public class FailoverProducer {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1];
        int threads = Integer.parseInt(args[2]);
        DefaultMQProducer producer = new DefaultMQProducer("failover_pg");
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("failover" + System.nanoTime());
        producer.setPollNameServerInterval(500);
        producer.setSendMsgTimeout(3000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        System.out.println("{\"op\":\"ready\"}");
        System.out.flush();
        AtomicBoolean running = new AtomicBoolean(true);
        AtomicInteger seq = new AtomicInteger();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int n = t;
            Thread w = new Thread(() -> {
                long lastFail = 0;
                while (running.get()) {
                    String key = "j" + n + "-" + seq.incrementAndGet();
                    try {
                        Message m = new Message(topic, "TagA", key, ("body-" + key).getBytes(StandardCharsets.UTF_8));
                        SendResult r = producer.send(m);
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            emit("{\"op\":\"ok\",\"key\":\"" + key + "\",\"t\":" + System.currentTimeMillis()
                                 + ",\"broker\":\"" + r.getMessageQueue().getBrokerName() + "\"}");
                        }
                        Thread.sleep(5);
                    } catch (Exception e) {
                        long now = System.currentTimeMillis();
                        if (now - lastFail > 100) {
                            lastFail = now;
                            String msg = String.valueOf(e.getMessage()).replace("\\", "/").replace("\"", "'");
                            if (msg.length() > 120) msg = msg.substring(0, 120);
                            emit("{\"op\":\"fail\",\"t\":" + now + ",\"error\":\"" + msg.replace("\n", " ") + "\"}");
                        }
                        try { Thread.sleep(20); } catch (InterruptedException ie) { return; }
                    }
                }
            });
            w.start();
            workers.add(w);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) { }
        running.set(false);
        for (Thread w : workers) w.join(10000);
        producer.shutdown();
        emit("{\"op\":\"done\"}");
    }

    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
