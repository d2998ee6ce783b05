import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/** A push consumer and a producer (with message trace on) that stay online until stdin closes (or the
 *  given seconds pass). Args: namesrv topic consumerGroup producerGroup seconds.
 *  Prints {"op":"ready","tracedMsgId":...} once both have registered (one send, one heartbeat round). */
public class OnlineClients {
    public static void main(String[] args) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(args[2]);
        c.setNamesrvAddr(args[0]);
        c.subscribe(args[1], "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        c.start();
        DefaultMQProducer p = new DefaultMQProducer(args[3], true);
        p.setNamesrvAddr(args[0]);
        p.start();
        SendResult sent = p.send(new Message(args[1], "TagO", "online-key", "online".getBytes("UTF-8")));
        p.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        Thread.sleep(1500);
        System.out.println("{\"op\":\"ready\",\"tracedMsgId\":\"" + sent.getMsgId() + "\"}");
        System.out.flush();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (Exception ignored) {
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        stdin.join(Long.parseLong(args[4]) * 1000);
        p.shutdown();
        c.shutdown();
        System.exit(0);
    }
}
