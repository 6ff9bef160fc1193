package rocketmq

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// The properties that carry RocketMQ's system properties through the
// engine. Users may not set names with this prefix.
const (
	propPrefix   = "rocketmq."
	propKeys     = propPrefix + "keys"      // keys joined by a space, as RocketMQ's KEYS property
	propBorn     = propPrefix + "born_ms"   // born timestamp, Unix ms
	propBornHost = propPrefix + "born_host" // born host
	propEncoding = propPrefix + "encoding"  // body encoding when not IDENTITY
)

// digest returns the body digest of b in RocketMQ's format: CRC32 (IEEE)
// as upper-case hex without leading zeros, MD5 and SHA1 as hex.
func digest(t pb.DigestType, b []byte) string {
	switch t {
	case pb.DigestType_MD5:
		s := md5.Sum(b)
		return hex.EncodeToString(s[:])
	case pb.DigestType_SHA1:
		s := sha1.Sum(b)
		return hex.EncodeToString(s[:])
	}
	return strings.ToUpper(strconv.FormatUint(uint64(crc32.ChecksumIEEE(b)), 16))
}

// toEngine translates one message; a non-nil status refuses it.
func (s *Server) toEngine(m *pb.Message, now int64) (engine.SendRequest, *pb.Status) {
	sp := m.GetSystemProperties()
	topic := m.GetTopic().GetName()
	if sp == nil || sp.GetMessageId() == "" {
		return engine.SendRequest{}, status(pb.Code_ILLEGAL_MESSAGE_ID, "system properties with a message_id are required")
	}
	if err := message.ValidateDedupID(sp.GetMessageId()); err != nil {
		return engine.SendRequest{}, status(pb.Code_ILLEGAL_MESSAGE_ID, "message_id: "+err.Error())
	}
	if d := sp.GetBodyDigest(); d != nil && !strings.EqualFold(d.GetChecksum(), digest(d.GetType(), m.GetBody())) {
		return engine.SendRequest{}, status(pb.Code_MESSAGE_CORRUPTED, fmt.Sprintf("body digest %s %q does not match the body", d.GetType(), d.GetChecksum()))
	}
	if len(m.GetBody()) == 0 {
		return engine.SendRequest{}, status(pb.Code_MESSAGE_BODY_EMPTY, "message body is empty")
	}
	if len(m.GetBody()) > s.opts.Limits.MaxBodyBytes {
		return engine.SendRequest{}, status(pb.Code_MESSAGE_BODY_TOO_LARGE, fmt.Sprintf("body is %d bytes; the limit is %d", len(m.GetBody()), s.opts.Limits.MaxBodyBytes))
	}
	props, system, st := properties(m)
	if st != nil {
		return engine.SendRequest{}, st
	}
	// The client's message ID is both the key (a recall answers with it)
	// and the dedup ID: a resend after a lost answer, even one racing the
	// first send, is stored once (engine/dedup.go claims the ID across
	// the append).
	req := engine.SendRequest{Message: message.Message{Topic: topic, Key: sp.GetMessageId(), DedupID: sp.GetMessageId(),
		Tag: sp.GetTag(), Group: sp.GetMessageGroup(), Properties: props, Body: m.GetBody()},
		// The clients stamp each attempt anew.
		DedupIgnore: []string{propBorn, propBornHost}, SystemProperties: system}
	switch sp.GetMessageType() {
	case pb.MessageType_NORMAL, pb.MessageType_MESSAGE_TYPE_UNSPECIFIED:
	case pb.MessageType_FIFO:
		if sp.GetMessageGroup() == "" {
			return req, status(pb.Code_ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message_group")
		}
	case pb.MessageType_DELAY:
	default:
		return req, unsupported("message type " + sp.GetMessageType().String())
	}
	if ts := sp.GetDeliveryTimestamp(); ts != nil {
		if err := ts.CheckValid(); err != nil || ts.GetSeconds() > 1<<40 {
			// Out of Timestamp's range, or milliseconds would overflow
			// (and read as a time in the past: an early delivery).
			return req, status(pb.Code_ILLEGAL_DELIVERY_TIME, fmt.Sprintf("delivery timestamp %d s %d ns is not a valid time", ts.GetSeconds(), ts.GetNanos()))
		}
		if sp.GetMessageType() == pb.MessageType_FIFO {
			// RocketMQ refuses the pair too: a delayed message would
			// overtake or hold up the rest of its message group.
			return req, status(pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a FIFO message cannot have a delivery timestamp")
		}
		// Rounded up: the engine fires once its millisecond clock
		// reaches the due time, so a due time cut down to its
		// millisecond would fire up to 1 ms before the one asked for.
		at := clock.CeilUnixMilli(ts.AsTime())
		if max := now + s.opts.Limits.MaxDelay.Milliseconds(); at > max {
			return req, status(pb.Code_ILLEGAL_DELIVERY_TIME, fmt.Sprintf("delivery time %s is beyond the maximum delay of %v (latest accepted now: %s)",
				ts.AsTime().UTC().Format(time.RFC3339Nano), s.opts.Limits.MaxDelay, time.UnixMilli(max).UTC().Format(time.RFC3339Nano)))
		}
		// Always the absolute time, even one already past (due at once):
		// a resend after it passed must ask for what the first send asked
		// for, or the dedup check would take it for a conflict.
		req.When = message.When{At: at}
	}
	return req, nil
}

// properties returns the user properties of m and the system ones the
// adapter carries as properties, with the names of the latter: they do
// not count against the user's limits (RocketMQ allows 128 user
// properties beside its system ones, and so does the engine by default).
// A user property with the reserved prefix is refused.
func properties(m *pb.Message) (props map[string]string, system []string, st *pb.Status) {
	sp := m.GetSystemProperties()
	props = make(map[string]string, len(m.GetUserProperties())+4)
	for k, v := range m.GetUserProperties() {
		if strings.HasPrefix(k, propPrefix) {
			return nil, nil, status(pb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, fmt.Sprintf("property %q: names starting with %q are reserved", k, propPrefix))
		}
		props[k] = v
	}
	if len(sp.GetKeys()) > 0 {
		props[propKeys] = strings.Join(sp.GetKeys(), " ")
	}
	if t := sp.GetBornTimestamp(); t != nil {
		props[propBorn] = strconv.FormatInt(t.AsTime().UnixMilli(), 10)
	}
	if sp.GetBornHost() != "" {
		props[propBornHost] = sp.GetBornHost()
	}
	if sp.GetBodyEncoding() == pb.Encoding_GZIP {
		props[propEncoding] = pb.Encoding_GZIP.String()
	}
	for _, k := range []string{propKeys, propBorn, propBornHost, propEncoding} {
		if _, ok := props[k]; ok {
			system = append(system, k)
		}
	}
	return props, system, nil
}

// SendMessage stores the messages in one engine batch (all or none). A
// message whose client ID was already stored in the topic (within the
// topic's dedup window, 24 h by default) is a resend of it (the clients
// resend after a lost answer) and is answered with the stored one, not
// stored again; the same ID with another body or delivery time is
// refused as ILLEGAL_MESSAGE_ID.
func (s *Server) SendMessage(ctx context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	msgs := req.GetMessages()
	if len(msgs) == 0 {
		return &pb.SendMessageResponse{Status: status(pb.Code_BAD_REQUEST, "no messages")}, nil
	}
	if n := s.opts.MaxBatch; len(msgs) > n {
		return &pb.SendMessageResponse{Status: status(pb.Code_BAD_REQUEST, fmt.Sprintf("%d messages in one request; the limit is %d", len(msgs), n))}, nil
	}
	for _, m := range msgs {
		if st := noNamespace(m.GetTopic()); st != nil {
			return &pb.SendMessageResponse{Status: st}, nil
		}
	}
	now := s.eng.Now()
	entries := make([]*pb.SendResultEntry, len(msgs))
	batch := make([]engine.SendRequest, 0, len(msgs))
	for _, m := range msgs {
		r, st := s.toEngine(m, now)
		if st != nil {
			return &pb.SendMessageResponse{Status: st, Entries: []*pb.SendResultEntry{{Status: st}}}, nil
		}
		if st := s.prepareTopic(m); st != nil {
			return &pb.SendMessageResponse{Status: st, Entries: []*pb.SendResultEntry{{Status: st}}}, nil
		}
		batch = append(batch, r)
	}
	rs, err := s.eng.SendBatch(ctx, batch)
	if err != nil {
		st := errStatus(err, pb.Code_TOPIC_NOT_FOUND)
		switch errs.CodeOf(err) {
		case errs.TooLarge:
			// The body, or else the key, tag and properties.
			st.Code = pb.Code_MESSAGE_PROPERTIES_TOO_LARGE
			for _, m := range msgs {
				if len(m.GetBody()) > s.opts.Limits.MaxBodyBytes {
					st.Code = pb.Code_MESSAGE_BODY_TOO_LARGE
				}
			}
		case errs.AlreadyExists:
			st.Code = pb.Code_ILLEGAL_MESSAGE_ID
		}
		return &pb.SendMessageResponse{Status: st, Entries: []*pb.SendResultEntry{{Status: st}}}, nil
	}
	for i, r := range rs {
		entries[i] = entry(msgs[i], r)
	}
	return &pb.SendMessageResponse{Status: ok(), Entries: entries}, nil
}

// entry is the answer for one stored message: the client's own message
// ID, and for a delayed message the recall handle (hourglass's ID).
func entry(m *pb.Message, r engine.Receipt) *pb.SendResultEntry {
	e := &pb.SendResultEntry{Status: ok(), MessageId: m.GetSystemProperties().GetMessageId(), Offset: int64(r.ID.Pos)}
	if m.GetSystemProperties().GetDeliveryTimestamp() != nil {
		e.RecallHandle = r.ID.String()
	}
	return e
}

// prepareTopic makes sure a FIFO message goes to a FIFO topic: it creates
// an unknown topic as FIFO (when topics are created on first send), and
// refuses a FIFO message to a topic that is not FIFO.
func (s *Server) prepareTopic(m *pb.Message) *pb.Status {
	if m.GetSystemProperties().GetMessageType() != pb.MessageType_FIFO {
		return nil
	}
	name := m.GetTopic().GetName()
	t, exists := s.topicInfo(name)
	switch {
	case exists && !t.FIFO:
		return status(pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, fmt.Sprintf("topic %q is not FIFO; it does not accept FIFO messages", name))
	case exists || !s.opts.AutoCreateTopics:
		return nil
	}
	err := s.eng.CreateTopic(name, engine.TopicConfig{Queues: s.opts.DefaultQueues, FIFO: true})
	switch {
	case err == nil:
		return nil
	case errs.CodeOf(err) != errs.AlreadyExists:
		return errStatus(err, pb.Code_TOPIC_NOT_FOUND)
	}
	// Another sender created it first, maybe not as FIFO: a topic's kind
	// never changes after, so this look settles it.
	if t, _ := s.topicInfo(name); !t.FIFO {
		return status(pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, fmt.Sprintf("topic %q is not FIFO; it does not accept FIFO messages", name))
	}
	return nil
}

// RecallMessage cancels a pending delayed message by its recall handle
// (its hourglass ID). A handle that does not parse, names no message, or
// names a message of another topic is MESSAGE_NOT_FOUND; a message already
// due, delivered or recalled is PRECONDITION_FAILED.
func (s *Server) RecallMessage(ctx context.Context, req *pb.RecallMessageRequest) (*pb.RecallMessageResponse, error) {
	if st := noNamespace(req.GetTopic()); st != nil {
		return &pb.RecallMessageResponse{Status: st}, nil
	}
	id, err := message.ParseID(req.GetRecallHandle())
	if err != nil {
		return &pb.RecallMessageResponse{Status: status(pb.Code_MESSAGE_NOT_FOUND, "recall handle is not one this broker issued")}, nil
	}
	info, err := s.eng.Inspect(id)
	if err != nil {
		return &pb.RecallMessageResponse{Status: errStatus(err, pb.Code_MESSAGE_NOT_FOUND)}, nil
	}
	if info.Topic != req.GetTopic().GetName() {
		return &pb.RecallMessageResponse{Status: status(pb.Code_MESSAGE_NOT_FOUND, "no message with this recall handle in topic "+strconv.Quote(req.GetTopic().GetName()))}, nil
	}
	if err := s.eng.Cancel(ctx, id); err != nil {
		return &pb.RecallMessageResponse{Status: errStatus(err, pb.Code_MESSAGE_NOT_FOUND)}, nil
	}
	return &pb.RecallMessageResponse{Status: ok(), MessageId: info.Key}, nil
}

// EndTransaction: transactional messages are not served.
func (s *Server) EndTransaction(ctx context.Context, req *pb.EndTransactionRequest) (*pb.EndTransactionResponse, error) {
	return &pb.EndTransactionResponse{Status: unsupported("transactional messages")}, nil
}
