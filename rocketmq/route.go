package rocketmq

import (
	"context"
	"fmt"
	"io"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// brokerName is the name of the one broker hourglass is in every route.
const brokerName = "hourglass"

// noNamespace refuses a resource in a namespace: hourglass has one
// namespace, and reading only the name would let clients of two
// namespaces share topics and groups without knowing it.
func noNamespace(rs ...*pb.Resource) *pb.Status {
	for _, r := range rs {
		if ns := r.GetResourceNamespace(); ns != "" {
			return status(pb.Code_BAD_REQUEST, fmt.Sprintf("resource namespaces are not supported: %q is in namespace %q; leave the client's namespace empty", r.GetName(), ns))
		}
	}
	return nil
}

// topicInfo returns the topic's queue count and kind, and whether it
// exists, without the engine's lock (a route, a FIFO send and a waiting
// long poll ask it often).
func (s *Server) topicInfo(name string) (engine.TopicInfo, bool) {
	n, fifo, ok := s.eng.TopicKind(name)
	return engine.TopicInfo{Name: name, Queues: n, FIFO: fifo}, ok
}

// queues returns the message queues of a topic as RocketMQ sees them: one
// per engine queue, all on this broker, at the endpoints the client used
// to reach it (so the route works behind any address that reaches us).
// An unknown topic that a send would create gets DefaultQueues queues
// accepting every type hourglass serves; the first send fixes its kind.
func (s *Server) queues(topic string, at *pb.Endpoints) ([]*pb.MessageQueue, *pb.Status) {
	if err := message.ValidateTopic(topic); err != nil {
		return nil, status(pb.Code_ILLEGAL_TOPIC, err.Error())
	}
	n := s.opts.DefaultQueues
	types := []pb.MessageType{pb.MessageType_NORMAL, pb.MessageType_DELAY, pb.MessageType_FIFO}
	if t, exists := s.topicInfo(topic); exists {
		n = t.Queues
		types = []pb.MessageType{pb.MessageType_NORMAL, pb.MessageType_DELAY}
		if t.FIFO {
			types = []pb.MessageType{pb.MessageType_FIFO, pb.MessageType_DELAY}
		}
	} else if !s.opts.AutoCreateTopics {
		return nil, status(pb.Code_TOPIC_NOT_FOUND, fmt.Sprintf("topic %q does not exist and topics are not created on first send", topic))
	}
	broker := &pb.Broker{Name: brokerName, Id: 0, Endpoints: at}
	perm := pb.Permission_READ_WRITE
	if engine.IsDeadLetterTopic(topic) {
		perm = pb.Permission_READ // the broker fills it; clients only read
	}
	out := make([]*pb.MessageQueue, n)
	for i := range out {
		out[i] = &pb.MessageQueue{Topic: &pb.Resource{Name: topic}, Id: int32(i),
			Permission: perm, Broker: broker, AcceptMessageTypes: types}
	}
	return out, nil
}

// QueryRoute answers the topic's queues, all served by this broker.
func (s *Server) QueryRoute(ctx context.Context, req *pb.QueryRouteRequest) (*pb.QueryRouteResponse, error) {
	if len(req.GetEndpoints().GetAddresses()) == 0 {
		return &pb.QueryRouteResponse{Status: status(pb.Code_ILLEGAL_ACCESS_POINT, "endpoints are required: the route points at the address the client used")}, nil
	}
	if st := noNamespace(req.GetTopic()); st != nil {
		return &pb.QueryRouteResponse{Status: st}, nil
	}
	qs, st := s.queues(req.GetTopic().GetName(), req.GetEndpoints())
	if st != nil {
		return &pb.QueryRouteResponse{Status: st}, nil
	}
	return &pb.QueryRouteResponse{Status: ok(), MessageQueues: qs}, nil
}

// QueryAssignment gives a push consumer every queue of the topic: the
// engine shares a topic's messages among a group's consumers by itself.
func (s *Server) QueryAssignment(ctx context.Context, req *pb.QueryAssignmentRequest) (*pb.QueryAssignmentResponse, error) {
	if len(req.GetEndpoints().GetAddresses()) == 0 {
		return &pb.QueryAssignmentResponse{Status: status(pb.Code_ILLEGAL_ACCESS_POINT, "endpoints are required")}, nil
	}
	if st := noNamespace(req.GetTopic(), req.GetGroup()); st != nil {
		return &pb.QueryAssignmentResponse{Status: st}, nil
	}
	qs, st := s.queues(req.GetTopic().GetName(), req.GetEndpoints())
	if st != nil {
		return &pb.QueryAssignmentResponse{Status: st}, nil
	}
	as := make([]*pb.Assignment, len(qs))
	for i, q := range qs {
		as[i] = &pb.Assignment{MessageQueue: q}
	}
	return &pb.QueryAssignmentResponse{Status: ok(), Assignments: as}, nil
}

// Heartbeat keeps nothing: hourglass holds no per-client state that
// expires, so a heartbeat is always OK.
func (s *Server) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	return &pb.HeartbeatResponse{Status: ok()}, nil
}

// NotifyClientTermination forgets the client's settings and renewals,
// unless a telemetry stream of that client ID is still open: the ID is
// the caller's word, and a call naming another client (or a stale call of
// a client that has reconnected) must not stop the renewals of a live one.
// Those end with the client's last stream anyway.
func (s *Server) NotifyClientTermination(ctx context.Context, req *pb.NotifyClientTerminationRequest) (*pb.NotifyClientTerminationResponse, error) {
	id := clientID(ctx)
	s.mu.Lock()
	live := s.streams[id] > 0
	s.mu.Unlock()
	if !live {
		s.forget(id)
	}
	return &pb.NotifyClientTerminationResponse{Status: ok()}, nil
}

func (s *Server) forget(id string) {
	s.mu.Lock()
	delete(s.longPollOf, id)
	s.mu.Unlock()
	s.renew.forget(id)
}

// streamOpened counts a telemetry stream of client id; the function it
// returns ends it, and forgets the client when it was the last.
func (s *Server) streamOpened(id string) (closed func()) {
	s.mu.Lock()
	s.streams[id]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.streams[id]--
		last := s.streams[id] <= 0
		if last {
			delete(s.streams, id)
		}
		s.mu.Unlock()
		if last {
			s.forget(id)
		}
	}
}

// Telemetry answers every Settings command at once with the settings the
// client must use (the official clients' Start waits for this answer);
// other commands are ignored. The stream ends when the client ends it or
// on Close.
func (s *Server) Telemetry(stream pb.MessagingService_TelemetryServer) error {
	id := clientID(stream.Context())
	defer s.streamOpened(id)()
	recvd := make(chan error, 1)
	go func() {
		// Returns when the stream ends: the handler's return cancels it.
		for {
			cmd, err := stream.Recv()
			if err != nil {
				recvd <- err
				return
			}
			st := cmd.GetSettings()
			if st == nil {
				continue
			}
			if err := stream.Send(&pb.TelemetryCommand{Status: ok(),
				Command: &pb.TelemetryCommand_Settings{Settings: s.settings(id, st)}}); err != nil {
				recvd <- err
				return
			}
		}
	}()
	select {
	case err := <-recvd:
		if err == io.EOF {
			return nil
		}
		return err
	case <-s.done:
		return nil
	}
}

// settings completes a client's settings with what the broker enforces.
func (s *Server) settings(id string, in *pb.Settings) *pb.Settings {
	out := proto.Clone(in).(*pb.Settings)
	switch ps := out.GetPubSub().(type) {
	case *pb.Settings_Publishing:
		ps.Publishing.MaxBodySize = int32(s.opts.Limits.MaxBodyBytes)
		ps.Publishing.ValidateMessageType = true
		// The client's own backoff policy is echoed (the broker imposes
		// none on producers): the official Java client refuses settings
		// without an exponential policy and then never starts. The Go
		// client gets none: it writes a received policy into the settings
		// object another of its goroutines may be marshalling (a data race
		// inside the client), and keeps its own without one.
		if in.GetUserAgent().GetLanguage() == pb.Language_GOLANG {
			out.BackoffPolicy = nil
		}
	case *pb.Settings_Subscription:
		sub := ps.Subscription
		lp := sub.GetLongPollingTimeout().AsDuration()
		if lp <= 0 || lp > s.opts.MaxLongPoll {
			lp = s.opts.MaxLongPoll
		}
		sub.LongPollingTimeout = durationpb.New(lp)
		if sub.GetReceiveBatchSize() <= 0 || sub.GetReceiveBatchSize() > engine.MaxReceive {
			sub.ReceiveBatchSize = proto.Int32(engine.DefaultReceive)
		}
		// A consumer of FIFO topics only is told so: the official push
		// consumers then consume a queue in order and retry a failed
		// message themselves before the next, as against a RocketMQ
		// orderly group, instead of nacking it and going on.
		sub.Fifo = proto.Bool(s.allFIFO(sub))
		out.BackoffPolicy = s.retryPolicy(sub)
		s.mu.Lock()
		s.longPollOf[id] = lp
		s.mu.Unlock()
	}
	return out
}

// retryPolicy is the retry policy a consumer is told: that of its group,
// the one of fewest attempts where the group exists on several subscribed
// topics (the clients list their subscriptions in no fixed order), else
// the engine's group defaults. The official push consumers retry a FIFO
// message themselves up to its MaxAttempts and then forward it to the
// dead-letter queue, so the policy they are told must be the group's, or
// they would hold a message for hours of backoff the broker does not
// apply; and their retries must end while the broker still renews the
// lease (AutoRenewMax), or the message would be delivered again beside
// them: the attempts told are cut so that their backoff stays within
// three quarters of it.
func (s *Server) retryPolicy(sub *pb.Subscription) *pb.RetryPolicy {
	cfg, found := engine.GroupConfig{}.WithDefaults(), false
	for _, e := range sub.GetSubscriptions() {
		gs, err := s.eng.Groups(e.GetTopic().GetName())
		if err != nil {
			continue
		}
		for _, g := range gs {
			if g.Name == sub.GetGroup().GetName() && (!found || g.Config.MaxAttempts < cfg.MaxAttempts) {
				cfg, found = g.Config, true
			}
		}
	}
	attempts, total := 1, time.Duration(0)
	for attempts < cfg.MaxAttempts {
		d := cfg.Backoff(uint32(attempts))
		if total+d > s.opts.AutoRenewMax*3/4 {
			break
		}
		total += d
		attempts++
	}
	return &pb.RetryPolicy{MaxAttempts: int32(attempts), Strategy: &pb.RetryPolicy_ExponentialBackoff{
		ExponentialBackoff: &pb.ExponentialBackoff{Initial: durationpb.New(cfg.BackoffBase), Max: durationpb.New(cfg.BackoffMax), Multiplier: 2}}}
}

// allFIFO reports whether every subscribed topic is FIFO (and there is
// one). A topic not created yet counts as not FIFO.
func (s *Server) allFIFO(sub *pb.Subscription) bool {
	for _, e := range sub.GetSubscriptions() {
		if _, fifo, ok := s.eng.TopicKind(e.GetTopic().GetName()); !ok || !fifo {
			return false
		}
	}
	return len(sub.GetSubscriptions()) > 0
}
