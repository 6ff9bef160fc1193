package remoting

import "fmt"

// RocketMQ's system topics that hourglass refuses as a client's request
// names them: RocketMQ's broker refuses a send to each (its
// TopicValidator's not-allowed set, and TBW102, the key a client creates
// topics by). Two of them are hourglass's own bookkeeping of transactions
// (tx.go): a message a client wrote there would be read as a half message
// or as the end of another producer's transaction, and the first send
// would create them with the default queue count where the broker reads
// one queue.
var (
	// noSendTopics answer NO_PERMISSION to a send, as RocketMQ does.
	// (The transaction topics, refused to every request, are in
	// brokerOnlyTopics.)
	noSendTopics = map[string]bool{"SCHEDULE_TOPIC_XXXX": true,
		"TRANS_CHECK_MAX_TIME_TOPIC": true, "SELF_TEST_TOPIC": true, "OFFSET_MOVED_EVENT": true}
	// reservedWordTopics answer SYSTEM_ERROR to a send, as RocketMQ does.
	reservedWordTopics = map[string]bool{"TBW102": true}
	// brokerOnlyTopics are read by the broker alone: a half message is
	// not consumed before its commit, and an end of transaction is the
	// broker's record; any request that names one is refused.
	brokerOnlyTopics = map[string]bool{halfTopic: true, opTopic: true}
)

// systemTopicRefusal answers a request that names a system topic a
// client may not use that way; nil for any other. A send's topic is read
// as the send reads it (sendTopic).
func systemTopicRefusal(req *Command) *Command {
	var topic string
	switch req.Code {
	case codeSendMessage, codeSendMessageV2, codeSendBatchMessage:
		topic = sendTopic(req)
	default:
		topic = req.ExtFields["topic"]
	}
	if topic == "" {
		return nil
	}
	if brokerOnlyTopics[topic] {
		return errResp(respNoPermission, fmt.Sprintf("topic[%s] is the broker's record of transactions: no client sends to it or reads it", topic))
	}
	switch req.Code {
	case codeSendMessage, codeSendMessageV2, codeSendBatchMessage:
		if noSendTopics[topic] {
			return errResp(respNoPermission, fmt.Sprintf("Sending message to topic[%s] is forbidden: it is a RocketMQ system topic", topic))
		}
		if reservedWordTopics[topic] {
			return errResp(respSystemError, fmt.Sprintf("the topic[%s] is conflict with system reserved words: it names how a client creates topics, not a topic to send to", topic))
		}
	}
	return nil
}
