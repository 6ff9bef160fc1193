package rocketmq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
)

// tagFilter returns whether a message of tag passes a TAG expression
// ("*", empty, or tags joined by "||"); ok is false for an expression
// hourglass cannot evaluate (SQL92).
func tagFilter(fe *pb.FilterExpression) (match func(tag string) bool, ok bool) {
	if fe.GetType() == pb.FilterType_SQL {
		return nil, false
	}
	expr := strings.TrimSpace(fe.GetExpression())
	if expr == "" || expr == "*" {
		return func(string) bool { return true }, true
	}
	set := map[string]bool{}
	for _, t := range strings.Split(expr, "||") {
		set[strings.TrimSpace(t)] = true
	}
	return func(tag string) bool { return set[tag] }, true
}

// longPoll is how long a receive may wait: the request's long-polling
// timeout, else the one of the client's settings, else MaxLongPoll; at
// most MaxLongPoll, and ending receiveMargin before the call's deadline.
func (s *Server) longPoll(ctx context.Context, req *pb.ReceiveMessageRequest) time.Duration {
	w := req.GetLongPollingTimeout().AsDuration()
	if w <= 0 {
		s.mu.Lock()
		w = s.longPollOf[clientID(ctx)]
		s.mu.Unlock()
	}
	if w <= 0 {
		w = s.opts.MaxLongPoll
	}
	w = min(w, s.opts.MaxLongPoll)
	if dl, has := ctx.Deadline(); has {
		w = min(w, time.Until(dl)-receiveMargin)
	}
	return max(w, 0)
}

// topicPoll is how often a receive on a topic not created yet looks for it.
const topicPoll = 100 * time.Millisecond

// waitTopic waits, for at most wait, until topic exists, when topics are
// created on first send: a consumer may start before its producer, and the
// route told it the topic is there. It returns what is left of wait. A
// topic that never appears is left to the engine to refuse (not found).
func (s *Server) waitTopic(ctx context.Context, topic string, wait time.Duration) time.Duration {
	if !s.opts.AutoCreateTopics {
		return wait
	}
	end := time.Now().Add(wait)
	t := time.NewTicker(topicPoll)
	defer t.Stop()
	for {
		if _, exists := s.topicInfo(topic); exists {
			return max(time.Until(end), 0)
		}
		if time.Until(end) <= 0 {
			return 0
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0
		}
	}
}

// ReceiveMessage answers as a server stream: the status, then the
// messages, then the end. An empty long poll ends with MESSAGE_NOT_FOUND.
// Messages whose tag the filter refuses are acknowledged for the group and
// not sent (RocketMQ's semantics: a group never sees what it filters out).
func (s *Server) ReceiveMessage(req *pb.ReceiveMessageRequest, stream pb.MessagingService_ReceiveMessageServer) error {
	send := func(st *pb.Status) error {
		return stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Status{Status: st}})
	}
	topic, group := req.GetMessageQueue().GetTopic().GetName(), req.GetGroup().GetName()
	if st := noNamespace(req.GetMessageQueue().GetTopic(), req.GetGroup()); st != nil {
		return send(st)
	}
	match, fok := tagFilter(req.GetFilterExpression())
	if !fok {
		return send(status(pb.Code_ILLEGAL_FILTER_EXPRESSION, "SQL92 filters are not supported by hourglass; use a TAG expression"))
	}
	invisible, batch, bad := s.receiveParams(req)
	if bad != nil {
		return send(bad)
	}
	// Close ends the long poll: the answer is then what there is (nothing).
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := s.waitTopic(ctx, topic, s.longPoll(ctx, req))
	rs, err := s.eng.Receive(ctx, engine.ReceiveRequest{Topic: topic, Group: group, Max: batch, Invisible: invisible, Wait: wait})
	if err != nil && ctx.Err() == nil {
		if _, exists := s.topicInfo(topic); !exists && s.opts.AutoCreateTopics {
			// Nothing was ever sent to it: an empty long poll, not an error.
			return send(status(pb.Code_MESSAGE_NOT_FOUND, "no message yet: topic "+strconv.Quote(topic)+" has had no send"))
		}
		return send(errStatus(err, pb.Code_TOPIC_NOT_FOUND))
	}
	out := s.filterReceived(ctx, topic, group, rs, match, req.GetMessageQueue())
	if len(out) == 0 {
		return send(status(pb.Code_MESSAGE_NOT_FOUND, "no new message"))
	}
	if req.GetAutoRenew() {
		receipts := make([]string, len(out))
		for i, m := range out {
			receipts[i] = m.GetSystemProperties().GetReceiptHandle()
		}
		s.renew.add(clientID(ctx), topic, group, receipts)
	}
	// A failed send: the messages not sent are given back at once, their
	// attempt not counted (engine.Release); those sent come back when
	// their lease ends, an auto_renew lease once it is no longer renewed.
	giveBack := func(from int) {
		var unsent []string
		for i, m := range out {
			h := m.GetSystemProperties().GetReceiptHandle()
			s.renew.drop(h)
			if i >= from {
				unsent = append(unsent, h)
			}
		}
		s.eng.Release(topic, group, unsent)
	}
	if err := send(ok()); err != nil {
		giveBack(0)
		return err
	}
	for i, m := range out {
		if err := stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Message{Message: m}}); err != nil {
			giveBack(i)
			return err
		}
	}
	return nil
}

// receiveParams checks a receive's invisible duration (the auto-renew
// lease for a push consumer) and batch size; a non-nil status refuses it.
func (s *Server) receiveParams(req *pb.ReceiveMessageRequest) (time.Duration, int, *pb.Status) {
	invisible := req.GetInvisibleDuration().AsDuration()
	if req.GetAutoRenew() {
		invisible = s.opts.AutoRenewLease
	}
	if invisible < time.Millisecond || invisible > engine.MaxInvisible {
		return 0, 0, status(pb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration "+invisible.String()+" is not in [1ms, "+engine.MaxInvisible.String()+"]")
	}
	batch := int(req.GetBatchSize())
	if batch <= 0 {
		batch = engine.DefaultReceive
	}
	batch = min(batch, engine.MaxReceive)
	return invisible, batch, nil
}

// filterReceived renders the received messages whose tag matches; the
// others are acked at once (a tag filter never delivers them).
func (s *Server) filterReceived(ctx context.Context, topic, group string, rs []engine.Received, match func(string) bool, mq *pb.MessageQueue) []*pb.Message {
	var out []*pb.Message
	var skipped []string
	for _, r := range rs {
		if !match(r.Message.Tag) {
			skipped = append(skipped, r.Receipt)
			continue
		}
		out = append(out, s.toMessage(r, mq))
	}
	if len(skipped) > 0 {
		if err := s.eng.Ack(context.WithoutCancel(ctx), topic, group, skipped...); err != nil {
			s.log.Warn("rocketmq: acking filtered-out messages failed; they come back when their lease ends", "topic", topic, "group", group, "err", err)
		}
	}
	return out
}

// toMessage renders a received message with RocketMQ's system properties.
func (s *Server) toMessage(r engine.Received, mq *pb.MessageQueue) *pb.Message {
	m := r.Message
	user := make(map[string]string, len(m.Properties))
	sp := &pb.SystemProperties{
		Tag: optional(m.Tag), MessageId: m.Key, ReceiptHandle: optional(r.Receipt),
		BodyDigest:        &pb.Digest{Type: pb.DigestType_CRC32, Checksum: digest(pb.DigestType_CRC32, m.Body)},
		BodyEncoding:      pb.Encoding_IDENTITY,
		MessageType:       pb.MessageType_NORMAL,
		BornTimestamp:     timestamppb.New(time.UnixMilli(m.Sent)),
		BornHost:          "",
		StoreTimestamp:    timestamppb.New(time.UnixMilli(m.Sent)),
		StoreHost:         brokerName,
		QueueId:           int32(r.Queue),
		QueueOffset:       optional(int64(r.Offset)),
		DeliveryAttempt:   optional(int32(r.Attempt)),
		MessageGroup:      optional(m.Group),
		DeliveryTimestamp: timestamppb.New(time.UnixMilli(r.Due)),
	}
	if m.Group != "" {
		sp.MessageType = pb.MessageType_FIFO
	} else if r.Due > m.Sent {
		sp.MessageType = pb.MessageType_DELAY
	}
	for k, v := range m.Properties {
		switch k {
		case propKeys:
			sp.Keys = strings.Split(v, " ")
		case propBorn:
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
				sp.BornTimestamp = timestamppb.New(time.UnixMilli(ms))
			}
		case propBornHost:
			sp.BornHost = v
		case propEncoding:
			sp.BodyEncoding = pb.Encoding_GZIP
		default:
			user[k] = v
		}
	}
	topic := mq.GetTopic()
	if topic == nil {
		topic = &pb.Resource{Name: m.Topic}
	}
	return &pb.Message{Topic: topic, UserProperties: user, SystemProperties: sp, Body: m.Body}
}

// optional returns a pointer to v, or nil for the zero value.
func optional[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// AckMessage acknowledges each entry on its own and answers per entry.
func (s *Server) AckMessage(ctx context.Context, req *pb.AckMessageRequest) (*pb.AckMessageResponse, error) {
	topic, group := req.GetTopic().GetName(), req.GetGroup().GetName()
	if st := noNamespace(req.GetTopic(), req.GetGroup()); st != nil {
		return &pb.AckMessageResponse{Status: st}, nil
	}
	if len(req.GetEntries()) == 0 || len(req.GetEntries()) > engine.MaxReceive {
		return &pb.AckMessageResponse{Status: status(pb.Code_BAD_REQUEST, "an ack carries 1 to "+strconv.Itoa(engine.MaxReceive)+" entries")}, nil
	}
	all := ok()
	out := make([]*pb.AckMessageResultEntry, len(req.GetEntries()))
	for i, e := range req.GetEntries() {
		s.renew.drop(e.GetReceiptHandle())
		st := malformedReceipt(e.GetReceiptHandle())
		if st != nil {
			all = st
		} else if err := s.ack(ctx, topic, group, e.GetReceiptHandle()); err != nil {
			st = errStatus(err, pb.Code_INVALID_RECEIPT_HANDLE)
			all = st
		} else {
			st = ok()
		}
		out[i] = &pb.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: st}
	}
	return &pb.AckMessageResponse{Status: all, Entries: out}, nil
}

// ChangeInvisibleDuration moves the end of a lease; the receipt stays
// valid, and an auto_renew lease is no longer renewed.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, req *pb.ChangeInvisibleDurationRequest) (*pb.ChangeInvisibleDurationResponse, error) {
	if st := noNamespace(req.GetTopic(), req.GetGroup()); st != nil {
		return &pb.ChangeInvisibleDurationResponse{Status: st}, nil
	}
	d := req.GetInvisibleDuration().AsDuration()
	if d < time.Millisecond || d > engine.MaxInvisible {
		return &pb.ChangeInvisibleDurationResponse{Status: status(pb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration "+d.String()+" is not in [1ms, "+engine.MaxInvisible.String()+"]")}, nil
	}
	// The client takes the lease over (a push listener that failed sets
	// its retry delay this way): renewing it would undo that.
	s.renew.drop(req.GetReceiptHandle())
	if st := malformedReceipt(req.GetReceiptHandle()); st != nil {
		return &pb.ChangeInvisibleDurationResponse{Status: st}, nil
	}
	if err := s.eng.ChangeInvisibility(ctx, req.GetTopic().GetName(), req.GetGroup().GetName(), req.GetReceiptHandle(), d); err != nil {
		return &pb.ChangeInvisibleDurationResponse{Status: errStatus(err, pb.Code_INVALID_RECEIPT_HANDLE)}, nil
	}
	return &pb.ChangeInvisibleDurationResponse{Status: ok(), ReceiptHandle: req.GetReceiptHandle()}, nil
}

// malformedReceipt refuses a receipt handle that cannot be one (empty,
// truncated, not base64) with INVALID_RECEIPT_HANDLE, the code on which
// the official clients stop retrying an ack, rather than BAD_REQUEST,
// which they retry every second for ever.
func malformedReceipt(h string) *pb.Status {
	if len(h) != engine.ReceiptChars || strings.IndexFunc(h, notURLBase64) >= 0 {
		return status(pb.Code_INVALID_RECEIPT_HANDLE, fmt.Sprintf("receipt handle %q is malformed", h[:min(len(h), 40)]))
	}
	return nil
}

// notURLBase64 reports a rune outside the unpadded URL base64 alphabet
// receipts are written in (checked without decoding: acks are a hot path,
// and the engine decodes the receipt once more anyway).
func notURLBase64(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

// ForwardMessageToDeadLetterQueue moves a leased message to its group's
// dead-letter topic at once and acks it: the official push consumers call
// it when a message has failed their maximum attempts (the settings'
// backoff policy), and retry it until it succeeds, holding the message
// (and in a FIFO group its whole queue) meanwhile. Without it the engine
// would still move the message after the group's attempts, but the
// client would never let go of it. A receipt that is well formed but names
// no live lease is answered OK with a message saying nothing was
// forwarded, for the same reason.
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, req *pb.ForwardMessageToDeadLetterQueueRequest) (*pb.ForwardMessageToDeadLetterQueueResponse, error) {
	if st := noNamespace(req.GetTopic(), req.GetGroup()); st != nil {
		return &pb.ForwardMessageToDeadLetterQueueResponse{Status: st}, nil
	}
	s.renew.drop(req.GetReceiptHandle())
	if st := malformedReceipt(req.GetReceiptHandle()); st != nil {
		return &pb.ForwardMessageToDeadLetterQueueResponse{Status: st}, nil
	}
	// delivery_attempt counts the client's own retries of a FIFO message
	// under one lease: the dead letter records those attempts, not only
	// the broker's deliveries.
	err := s.eng.DeadLetterAttempts(ctx, req.GetTopic().GetName(), req.GetGroup().GetName(), req.GetReceiptHandle(), int(req.GetDeliveryAttempt()))
	switch {
	case errs.CodeOf(err) == errs.NotFound:
		// The lease is gone (it ran out, the broker restarted, the group
		// went): the broker holds the message again, and will deliver it
		// again or has finished with it. The clients retry a forward on
		// any other answer, every second for ever, holding the message.
		return &pb.ForwardMessageToDeadLetterQueueResponse{Status: status(pb.Code_OK, "nothing forwarded: "+err.Error()+"; the broker delivers the message again unless the group has finished it")}, nil
	case err != nil:
		return &pb.ForwardMessageToDeadLetterQueueResponse{Status: errStatus(err, pb.Code_INVALID_RECEIPT_HANDLE)}, nil
	}
	return &pb.ForwardMessageToDeadLetterQueueResponse{Status: ok()}, nil
}

// ack acknowledges one receipt: answered once its record is durable,
// or with Options.EarlyAcks once its lease has ended (engine.AckBehind).
func (s *Server) ack(ctx context.Context, topic, group, receipt string) error {
	if s.opts.EarlyAcks {
		return s.eng.AckBehind(ctx, topic, group, receipt)
	}
	return s.eng.Ack(ctx, topic, group, receipt)
}
