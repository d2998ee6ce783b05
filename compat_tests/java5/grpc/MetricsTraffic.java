import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * The traffic the metrics comparison scrapes after: COUNT normal messages sent to TOPIC and one timer message
 * (delivered DELAY_MS later) to TIMER_TOPIC (a DELAY topic: 5.x refuses a timer message on a NORMAL topic), then a
 * simple consumer of GROUP subscribed to both receives and acks all COUNT + 1.
 * Args: endpoint topic timerTopic group count delayMs. Prints {"op":"send"} / {"op":"receive"} lines.
 */
public class MetricsTraffic {
    public static void main(String[] args) throws Exception {
        String endpoint = args[0], topic = args[1], timerTopic = args[2], group = args[3];
        int count = Integer.parseInt(args[4]);
        long delayMs = Long.parseLong(args[5]);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration conf = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10)).build();
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(conf)
                .setTopics(topic, timerTopic).build()) {
            for (int i = 0; i < count; i++) {
                producer.send(provider.newMessageBuilder().setTopic(topic).setTag("TagA")
                    .setBody(("normal-" + i).getBytes(StandardCharsets.UTF_8)).build());
                Json.event("send", "body", "normal-" + i);
            }
            producer.send(provider.newMessageBuilder().setTopic(timerTopic).setTag("TagA")
                .setDeliveryTimestamp(System.currentTimeMillis() + delayMs)
                .setBody("timer-0".getBytes(StandardCharsets.UTF_8)).build());
            Json.event("send", "body", "timer-0");
        }
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(conf)
                .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(3))
                .setSubscriptionExpressions(subscriptions(topic, timerTopic)).build()) {
            int got = 0;
            long deadline = System.currentTimeMillis() + 30000 + delayMs;
            while (got < count + 1 && System.currentTimeMillis() < deadline) {
                List<MessageView> views = consumer.receive(16, Duration.ofSeconds(15));
                for (MessageView v : views) {
                    consumer.ack(v);
                    Json.event("receive", "body", StandardCharsets.UTF_8.decode(v.getBody()).toString());
                    got++;
                }
            }
        }
        System.exit(0);
    }

    static java.util.Map<String, FilterExpression> subscriptions(String... topics) {
        java.util.Map<String, FilterExpression> out = new java.util.HashMap<>();
        for (String t : topics) {
            out.put(t, new FilterExpression("*"));
        }
        return out;
    }
}
