package remoting

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// offsetMsgID is the "offset message ID" a send answers with, in
// RocketMQ's form (store host address, port, then an 8-byte offset, in
// upper-case hex), so that clients that decode it (a transactional
// producer does; a view by ID connects to its address) can. Its offset is
// a handle (handles.seal) of the message's position.
func offsetMsgID(local string, handle uint64) string {
	ip, port := splitHost(local)
	b := ip.To4()
	if b == nil {
		b = ip.To16()
	}
	b = binary.BigEndian.AppendUint32(append([]byte(nil), b...), uint32(port))
	b = binary.BigEndian.AppendUint64(b, handle)
	return strings.ToUpper(hex.EncodeToString(b))
}

// handleOf reads the handle of an offset message ID (IPv4 or IPv6 form).
func handleOf(id string) (uint64, bool) {
	b, err := hex.DecodeString(id)
	if err != nil || (len(b) != 16 && len(b) != 28) {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[len(b)-8:]), true
}

// viewMessage answers VIEW_MESSAGE_BY_ID: the message whose handle is the
// offset (of an offset message ID the broker handed out), in the topic the
// request names if it names one (RocketMQ 5's clients do).
func (s *Server) viewMessage(c *conn, req *Command) *Command {
	f := &fields{m: req.ExtFields}
	h := f.int64("offset")
	if f.err != nil {
		return badRequest(f.err)
	}
	return s.byHandle(c, uint64(h), req.ExtFields["topic"])
}

// holdingAnswer answers a request that reads whole messages (a view or a
// query) with a token of the connection's answers held, as a pull's
// messages are: from before the first read until an answer with a
// message is written, so a client that sends many and reads none holds
// at most maxPullsAnswering messages.
func (s *Server) holdingAnswer(c *conn, answer func() *Command) *Command {
	if !c.holdAnswer(s.done) {
		return errResp(respSystemBusy, "the broker is closing")
	}
	held := true
	defer func() {
		if held { // no message in the answer (an error, a panic)
			c.releaseAnswer()
		}
	}()
	resp := answer()
	if resp != nil && len(resp.Body) > 0 {
		resp.release, held = c.releaseAnswer, false // until the answer is written
	}
	return resp
}

// byHandle answers with the message of a handle, or QUERY_NOT_FOUND.
func (s *Server) byHandle(c *conn, h uint64, topic string) *Command {
	id, err := s.eng.MessageAt(s.handles.open(h))
	if err != nil {
		return engineErr(err, respQueryNotFound)
	}
	return s.messageResp(c, id, topic)
}

// messageResp answers with one message, by ID, in a query's response form;
// a message of another topic than topic (when given), or cancelled, is
// not found.
func (s *Server) messageResp(c *conn, id message.ID, topic string) *Command {
	info, err := s.eng.Inspect(id)
	if err != nil {
		return engineErr(err, respQueryNotFound)
	}
	if info.State == engine.StateCancelled || (topic != "" && info.Topic != topic) {
		return errResp(respQueryNotFound, "no such message in topic "+strconv.Quote(topic))
	}
	body, _, err := s.eng.Peek(info.ID, s.opts.Limits.MaxBodyBytes)
	if err != nil {
		return engineErr(err, respQueryNotFound)
	}
	v := &engine.Visible{ID: info.ID, Visible: info.Visible, Due: info.Due, Message: &message.Stored{
		Message: message.Message{Topic: info.Topic, Key: info.Key, Tag: info.Tag, Properties: info.Properties, Body: body},
		Queue:   info.Queue, Sent: info.Sent}}
	w := s.wire(c, info.Topic, info.Queue, v)
	w.commitOffset = int64(s.handles.seal(info.ID.Pos))
	// A view shows the message as stored (RocketMQ's view of the ID a
	// send returned shows its stored copy): its store time, which its
	// delay counts from, not when it became visible.
	w.storeTimestamp = info.Sent
	return &Command{Code: respSuccess, Body: appendWire(nil, w), ExtFields: map[string]string{
		"indexLastUpdateTimestamp": strconv.FormatInt(s.eng.Now(), 10), "indexLastUpdatePhyoffset": "0"}}
}

// queryMessage answers QUERY_MESSAGE: by key, the latest message of the
// topic with it as its first key (or as its message ID when it has no
// key); by unique key (the clients' view by topic and ID falls back to
// it), the message with that message ID (UNIQ_KEY), or the message of an
// offset message ID the broker handed out.
func (s *Server) queryMessage(c *conn, req *Command) *Command {
	f := &fields{m: req.ExtFields}
	topic, key := f.str("topic"), f.str("key")
	if f.err == nil {
		f.err = checkTopic(topic)
	}
	if f.err != nil {
		return badRequest(f.err)
	}
	if !f.bool("_UNIQUE_KEY_QUERY") {
		id, err := s.eng.LookupKey(topic, key)
		if err != nil {
			return engineErr(err, respQueryNotFound)
		}
		return s.messageResp(c, id, topic)
	}
	if id, err := s.eng.LookupDedup(topic, key); err == nil {
		return s.messageResp(c, id, topic)
	}
	if h, ok := handleOf(key); ok {
		return s.byHandle(c, h, topic)
	}
	return errResp(respQueryNotFound, fmt.Sprintf("no message with ID %q in topic %q", key, topic))
}
