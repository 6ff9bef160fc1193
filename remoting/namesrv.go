package remoting

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// queueData and brokerData are the route's JSON (RocketMQ's QueueData and
// BrokerData); brokerAddrs maps broker ID 0 (the master) to the address.
type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
}

type brokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

type routeData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []queueData         `json:"queueDatas"`
	BrokerDatas       []brokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// checkTopic checks a topic name as RocketMQ clients will use it: the
// engine's rules, and at most 127 bytes (a stored message's topic length
// is one byte).
func checkTopic(topic string) error {
	if err := message.ValidateTopic(topic); err != nil {
		return err
	}
	if len(topic) > maxTopicLen {
		return fmt.Errorf("topic %q is %d bytes; RocketMQ's limit is %d", topic, len(topic), maxTopicLen)
	}
	return nil
}

// queueCount is the number of queues a topic has, or would have once a
// send creates it; ok is false for a topic that does not exist and that
// no send may create.
func (s *Server) queueCount(topic string) (n int, ok bool) {
	if q, _, exists := s.eng.TopicKind(topic); exists {
		return q, true
	}
	switch {
	case strings.HasPrefix(topic, retryPrefix), strings.HasPrefix(topic, dlqPrefix):
		return 1, true
	case s.opts.AutoCreateTopics:
		return s.opts.DefaultQueues, true
	}
	return 0, false
}

// route answers GET_ROUTEINFO_BY_TOPIC: every queue is on this broker, at
// the address the client reached it at.
func (s *Server) route(c *conn, req *Command) *Command {
	f := &fields{m: req.ExtFields}
	topic := f.str("topic")
	if f.err == nil {
		f.err = checkTopic(topic)
	}
	if f.err != nil {
		return badRequest(f.err)
	}
	n, ok := s.queueCount(topic)
	if !ok {
		return errResp(respTopicNotExist, fmt.Sprintf("No topic route info in name server for the topic: %s (hourglass creates topics on first send only with auto-create on)", topic))
	}
	perm := permRead | permWrite
	if engine.IsDeadLetterTopic(topic) {
		perm = permRead // the broker fills it
	}
	rd := routeData{
		QueueDatas:        []queueData{{BrokerName: brokerName, ReadQueueNums: n, WriteQueueNums: n, Perm: perm}},
		BrokerDatas:       []brokerData{{Cluster: clusterName, BrokerName: brokerName, BrokerAddrs: map[string]string{"0": c.local}}},
		FilterServerTable: map[string][]string{},
	}
	body, err := json.Marshal(rd)
	if err != nil {
		return errResp(respSystemError, err.Error())
	}
	return &Command{Code: respSuccess, Body: body}
}

// clusterInfo answers GET_BROKER_CLUSTER_INFO: one cluster of one broker.
func (s *Server) clusterInfo(c *conn) *Command {
	body, err := json.Marshal(map[string]any{
		"brokerAddrTable": map[string]brokerData{brokerName: {Cluster: clusterName, BrokerName: brokerName,
			BrokerAddrs: map[string]string{"0": c.local}}},
		"clusterAddrTable": map[string][]string{clusterName: {brokerName}},
	})
	if err != nil {
		return errResp(respSystemError, err.Error())
	}
	return &Command{Code: respSuccess, Body: body}
}
