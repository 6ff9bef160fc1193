import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * The one class whose package moved between the 4.x client and the other
 * (MessageModel): compiled only for 4.x clients, so the cases stay one
 * source for both.
 */
final class Models {
    private Models() {
    }

    /** Sets the consumer to broadcasting: every consumer of the group gets every message. */
    static void broadcasting(DefaultMQPushConsumer c) {
        c.setMessageModel(MessageModel.BROADCASTING);
    }
}
