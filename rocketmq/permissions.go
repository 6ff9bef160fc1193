package rocketmq

import (
	"context"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/codes"
	gstatus "google.golang.org/grpc/status"

	"github.com/hourglass-mq/hourglass/access"
)

// need is the permission a request needs; an empty action needs only a
// verified principal.
type need struct {
	action   access.Action
	resource string
}

// permit checks that p may make req, before any handler looks up what req
// names: a refusal (gRPC PermissionDenied) names the action and the
// resource, the same whether or not the resource exists. A route query
// needs some permission on its topic (producers and consumers both ask);
// heartbeats, telemetry and termination notices need none. Each refusal
// is audited. It returns the need of a request that has one.
func (s *Server) permit(ctx context.Context, p *access.Principal, req any) (need, error) {
	var needs []need
	switch r := req.(type) {
	case *pb.SendMessageRequest:
		for _, m := range r.GetMessages() {
			needs = append(needs, need{access.Send, m.GetTopic().GetName()})
		}
	case *pb.EndTransactionRequest:
		needs = append(needs, need{access.Send, r.GetTopic().GetName()})
	case *pb.RecallMessageRequest:
		needs = append(needs, need{access.Manage, r.GetTopic().GetName()})
	case *pb.ReceiveMessageRequest:
		needs = append(needs, consume(r.GetMessageQueue().GetTopic(), r.GetGroup()))
	case *pb.AckMessageRequest:
		needs = append(needs, consume(r.GetTopic(), r.GetGroup()))
	case *pb.ChangeInvisibleDurationRequest:
		needs = append(needs, consume(r.GetTopic(), r.GetGroup()))
	case *pb.ForwardMessageToDeadLetterQueueRequest:
		needs = append(needs, consume(r.GetTopic(), r.GetGroup()))
	case *pb.QueryAssignmentRequest:
		needs = append(needs, consume(r.GetTopic(), r.GetGroup()))
	case *pb.QueryRouteRequest:
		if t := r.GetTopic().GetName(); !p.SeesTopic(t) {
			s.audit.Record(ctx, "grpc", p.Name, access.Send, t, access.ResultDenied, "route query")
			return need{}, gstatus.Errorf(codes.PermissionDenied, "principal %q may not use topic %s: no rule of its names it", p.Name, t)
		}
	}
	for _, n := range needs {
		if err := p.Check(n.action, n.resource); err != nil {
			s.audit.Record(ctx, "grpc", p.Name, n.action, n.resource, access.ResultDenied, "")
			return need{}, gstatus.Error(codes.PermissionDenied, err.Error())
		}
	}
	if len(needs) == 1 {
		return needs[0], nil
	}
	return need{}, nil
}

func consume(topic, group *pb.Resource) need {
	return need{access.Receive, access.ConsumerResource(topic.GetName(), group.GetName())}
}

// statusOf is implemented by every response of the service.
type statusOf interface{ GetStatus() *pb.Status }

// auditResult is the audit trail's result of a call: ok, or failed with
// the RocketMQ status code.
func auditResult(resp any, err error) string {
	if err != nil {
		return access.ResultFailed
	}
	if r, ok := resp.(statusOf); ok && r.GetStatus().GetCode() != pb.Code_OK {
		return access.ResultFailed + ": " + r.GetStatus().GetCode().String()
	}
	return access.ResultOK
}
