import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * The 5.x gRPC Java client (rocketmq-client-java) producing through a failover: sends keyed messages to TOPIC over
 * ENDPOINTS ("a;b") until AFTER sends were acknowledged after FLAG (a file) appeared, or SECONDS passed.
 * Args: endpoints topic prefix seconds flag after. Prints {"op":"ready"}, then per send {"op":"ok","key":..,"t":ms}
 * or {"op":"err","key":..,"error":..,"t":ms}, and {"op":"producer_done","sent":n}.
 */
public class Grpc5FailoverProducer {
    public static void main(String[] args) throws Exception {
        String endpoints = args[0], topic = args[1], prefix = args[2];
        long deadline = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000;
        File flag = new File(args[4]);
        int afterWanted = Integer.parseInt(args[5]);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration conf = ClientConfiguration.newBuilder().setEndpoints(endpoints).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(3)).build();
        int i = 0, after = 0;
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(conf).setTopics(topic).build()) {
            Json.event("ready", "t", System.currentTimeMillis());
            while (System.currentTimeMillis() < deadline && after < afterWanted) {
                boolean killed = flag.exists();
                String key = prefix + i++;
                try {
                    SendReceipt r = producer.send(provider.newMessageBuilder().setTopic(topic).setKeys(key)
                        .setBody(("body-" + key).getBytes(StandardCharsets.UTF_8)).build());
                    Json.event("ok", "key", key, "id", r.getMessageId().toString(), "t", System.currentTimeMillis());
                    if (killed) {
                        after++;
                    }
                } catch (Exception e) {
                    Json.event("err", "key", key, "error", String.valueOf(e).substring(0, Math.min(200,
                        String.valueOf(e).length())), "t", System.currentTimeMillis());
                    Thread.sleep(100);
                }
                Thread.sleep(10);
            }
        }
        Json.event("producer_done", "sent", i);
        System.exit(0);
    }
}
