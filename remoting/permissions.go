package remoting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hourglass-mq/hourglass/access"
)

// permit checks that the request's principal may make it, before any
// handler looks up what it names; a refusal names the action and the
// resource, the same whether or not the resource exists, and is audited,
// as are the message-management requests it lets through. Requests that
// name no resource (heartbeats, cluster info, unregistering) need only a
// verified principal. An end of transaction names no topic: it is checked
// where the half message is found (tx.go).
func (s *Server) permit(c *conn, req *Command) error {
	p, ext := req.principal, req.ExtFields
	var a access.Action
	var res string
	allowed := true
	switch req.Code {
	case codeSendMessage, codeSendMessageV2, codeSendBatchMessage:
		topic := sendTopic(req)
		if g, ok := internalGroup(topic); ok {
			a, res, allowed = access.Receive, "*/"+g, p.ConsumesGroup(g)
		} else {
			a, res, allowed = access.Send, topic, p.Allowed(access.Send, topic)
		}
	case codePullMessage, codeLitePullMessage, codeQueryConsumerOffset, codeUpdateConsumerOffset:
		a, res, allowed = consume(p, ext["topic"], ext["consumerGroup"])
	case codeGetMaxOffset, codeGetMinOffset, codeSearchOffsetByTime, codeGetEarliestMsgTime, codeGetRouteInfoByTopic:
		topic := ext["topic"]
		if g, ok := internalGroup(topic); ok {
			a, res, allowed = access.Receive, "*/"+g, p.ConsumesGroup(g)
		} else {
			a, res, allowed = access.Send, topic, p.SeesTopic(topic)
		}
	case codeConsumerSendMsgBack:
		g := ext["group"]
		a, res, allowed = access.Receive, "*/"+g, p.ConsumesGroup(g)
		if t := ext["originTopic"]; allowed && t != "" {
			a, res, allowed = consume(p, t, g)
		}
	case codeHeartBeat:
		// Joining a group moves its queues (client-side rebalance): only
		// a consumer of the group, of the topics it subscribes, may.
		var hb heartbeatData
		if json.Unmarshal(req.Body, &hb) == nil {
			a, res, allowed = heartbeatNeeds(p, hb)
		}
	case codeUnregisterClient:
		if g := ext["consumerGroup"]; g != "" {
			a, res, allowed = access.Receive, "*/"+g, p.ConsumesGroup(g)
		}
	case codeGetConsumerListByGroup:
		g := ext["consumerGroup"]
		a, res, allowed = access.Receive, "*/"+g, p.ConsumesGroup(g)
	case codeLockBatchMQ, codeUnlockBatchMQ:
		var b lockBody
		if json.Unmarshal(req.Body, &b) == nil {
			for _, mq := range b.MQSet {
				if a, res, allowed = consume(p, mq.Topic, b.ConsumerGroup); !allowed {
					break
				}
			}
		}
	case codeQueryMessage:
		a, res, allowed = access.Manage, ext["topic"], p.Allowed(access.Manage, ext["topic"])
	case codeViewMessageByID:
		// An offset message ID names no topic: only a principal that may
		// manage every topic views by ID.
		a, res, allowed = access.Manage, "message "+ext["offsetMsgId"], p.AllowedAll(access.Manage)
	}
	if !allowed {
		s.audit.Record(context.Background(), "remoting", p.Name, a, res, access.ResultDenied, codeName(req.Code))
		return access.Denied(p, a, res)
	}
	if a == access.Manage {
		s.audit.Record(context.Background(), "remoting", p.Name, a, res, access.ResultOK, codeName(req.Code))
	}
	return nil
}

// heartbeatNeeds checks the consumer groups a heartbeat joins and the
// topics they subscribe.
func heartbeatNeeds(p *access.Principal, hb heartbeatData) (access.Action, string, bool) {
	for _, cd := range hb.ConsumerDataSet {
		if !p.ConsumesGroup(cd.GroupName) {
			return access.Receive, "*/" + cd.GroupName, false
		}
		for _, sd := range cd.SubscriptionDataSet {
			if a, res, ok := consume(p, sd.Topic, cd.GroupName); !ok {
				return a, res, false
			}
		}
	}
	return "", "", true
}

// consume is the receive permission of group g on topic t; RocketMQ's
// retry and dead-letter topics belong to the group they name. A retry
// topic is read by its own group only. A dead-letter topic is read, as in
// RocketMQ, by a group of its own (an operator's or a repair job's):
// the principal must consume as that group and as the dead letters'.
func consume(p *access.Principal, t, g string) (access.Action, string, bool) {
	if rg, ok := internalGroup(t); ok {
		if strings.HasPrefix(t, dlqPrefix) {
			return access.Receive, "*/" + rg, p.ConsumesGroup(rg) && p.ConsumesGroup(g)
		}
		return access.Receive, "*/" + rg, rg == g && p.ConsumesGroup(g)
	}
	res := access.ConsumerResource(t, g)
	return access.Receive, res, p.Allowed(access.Receive, res)
}

// internalGroup returns the group of a retry or dead-letter topic.
func internalGroup(topic string) (string, bool) {
	if g, ok := strings.CutPrefix(topic, retryPrefix); ok {
		return g, true
	}
	return strings.CutPrefix(topic, dlqPrefix)
}

func codeName(code int32) string { return fmt.Sprintf("request code %d", code) }

// errHalfNotFound is the answer to an end of transaction whose half
// message is not found, or is one the principal may not send.
var errHalfNotFound = errors.New("no half message with this message ID at this offset")
