import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * Access control 2.0 matrix probe with the 5.x gRPC Java client (rocketmq-client-java, StaticSessionCredentialsProvider).
 * Each stdin line is "accessKey secretKey op..." ("-" "-" for no credentials); ops: send:TOPIC (a producer without
 * topics sends one message) and receive:TOPIC:GROUP (a simple consumer of GROUP subscribed to TOPIC receives once).
 * Prints {"op":"result","probe":N,"step":op,"ok":..,"code":..,"error":..} per op, then {"op":"end","probe":N}.
 * The code is the response code the client reports ("response-code=N" in its exception), -1 without one.
 * Args: endpoint.
 */
public class Auth5GrpcProbe {
    static final Pattern CODE = Pattern.compile("response-code=(\\d+)");

    public static void main(String[] args) throws Exception {
        String endpoint = args[0];
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        Json.event("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        int n = 0;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            if (words.length < 3) {
                continue;
            }
            n++;
            ClientConfigurationBuilder b = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
                .setRequestTimeout(Duration.ofSeconds(5));
            if (!"-".equals(words[0])) {
                b.setCredentialProvider(new StaticSessionCredentialsProvider(words[0], words[1]));
            }
            ClientConfiguration conf = b.build();
            Producer producer = null;           // one producer for the identity's sends
            for (int i = 2; i < words.length; i++) {
                String[] op = words[i].split(":");
                try {
                    if ("send".equals(op[0])) {
                        if (producer == null) {
                            producer = provider.newProducerBuilder().setClientConfiguration(conf).build();
                        }
                        producer.send(provider.newMessageBuilder().setTopic(op[1]).setTag("TagA")
                            .setBody("auth".getBytes(StandardCharsets.UTF_8)).build());
                    } else {
                        try (SimpleConsumer c = provider.newSimpleConsumerBuilder().setClientConfiguration(conf)
                            .setConsumerGroup(op[2]).setAwaitDuration(Duration.ofSeconds(1))
                            .setSubscriptionExpressions(Collections.singletonMap(op[1], FilterExpression.SUB_ALL))
                            .build()) {
                            c.receive(1, Duration.ofSeconds(10));
                        }
                    }
                    Json.event("result", "probe", n, "step", words[i], "ok", true, "code", 0, "error", null);
                } catch (Throwable e) {
                    Throwable t = e;
                    String message = String.valueOf(t.getMessage());
                    Matcher m = CODE.matcher(message);
                    while (!m.find() && t.getCause() != null && t.getCause() != t) {
                        t = t.getCause();
                        message = String.valueOf(t.getMessage());
                        m = CODE.matcher(message);
                    }
                    int code = m.find(0) ? Integer.parseInt(m.group(1)) : -1;
                    Json.event("result", "probe", n, "step", words[i], "ok", false, "code", code, "error", message);
                }
            }
            if (producer != null) {
                producer.close();
            }
            Json.event("end", "probe", n);
        }
        System.exit(0);
    }
}
