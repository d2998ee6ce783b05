import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * The 5.x gRPC Java client (rocketmq-client-java) against one endpoint: sends COUNT messages to TOPIC, then a
 * simple consumer of GROUP receives and acks them. Args: endpoint topic group count ssl(true|false|default: the
 * client's own default, TLS on).
 * Prints one JSON line per send ({"op":"send","body":...}) and per receive ({"op":"receive","body":...}).
 */
public class Grpc5Smoke {
    public static void main(String[] args) throws Exception {
        String endpoint = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder().setEndpoints(endpoint)
            .setRequestTimeout(Duration.ofSeconds(10));
        if (!"default".equals(args[4])) {
            builder.enableSsl(Boolean.parseBoolean(args[4]));
        }
        ClientConfiguration conf = builder.build();
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(conf).setTopics(topic).build()) {
            for (int i = 0; i < count; i++) {
                String body = "smoke-" + i;
                SendReceipt r = producer.send(provider.newMessageBuilder().setTopic(topic).setTag("TagA")
                    .setKeys("k" + i).setBody(body.getBytes(StandardCharsets.UTF_8)).build());
                Json.event("send", "body", body, "messageId", r.getMessageId().toString());
            }
        }
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(conf)
                .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(3))
                .setSubscriptionExpressions(Collections.singletonMap(topic, new FilterExpression("*"))).build()) {
            int got = 0;
            long deadline = System.currentTimeMillis() + 60000;
            while (got < count && System.currentTimeMillis() < deadline) {
                List<MessageView> views = consumer.receive(16, Duration.ofSeconds(15));
                for (MessageView v : views) {
                    String body = StandardCharsets.UTF_8.decode(v.getBody()).toString();
                    consumer.ack(v);
                    Json.event("receive", "body", body, "tag", v.getTag().orElse(""));
                    got++;
                }
            }
        }
        System.exit(0);
    }
}
