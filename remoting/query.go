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
// producer does) can. Its offset is the message's position in the commit
// log; without the tag of the message's hourglass ID it names nothing
// (see viewMessage).
func offsetMsgID(local string, pos uint64) string {
	ip, port := splitHost(local)
	b := ip.To4()
	if b == nil {
		b = ip.To16()
	}
	b = binary.BigEndian.AppendUint32(append([]byte(nil), b...), uint32(port))
	b = binary.BigEndian.AppendUint64(b, pos)
	return strings.ToUpper(hex.EncodeToString(b))
}

// viewMessage answers VIEW_MESSAGE_BY_ID, which names a message by the
// offset of its offset message ID alone: a commit-log position, which
// anyone can count, is not an ID hourglass hands out (an ID carries a tag
// that only the broker can make), so it names no message. The clients'
// view by topic and ID then queries by the message ID (UNIQ_KEY), which
// queryMessage answers.
func (s *Server) viewMessage(req *Command) *Command {
	return errResp(respQueryNotFound, "hourglass does not look messages up by commit-log offset; query by the message ID (UNIQ_KEY) or a key with the topic")
}

// queryMessage answers QUERY_MESSAGE: the latest message of the topic
// with that key (hourglass indexes a message's first key, or its message
// ID when it has no key), by key or by message ID (the clients' unique-key
// query, which must match UNIQ_KEY too).
func (s *Server) queryMessage(c *conn, req *Command) *Command {
	f := &fields{m: req.ExtFields}
	topic, key := f.str("topic"), f.str("key")
	if f.err == nil {
		f.err = checkTopic(topic)
	}
	if f.err != nil {
		return badRequest(f.err)
	}
	uniq := f.bool("_UNIQUE_KEY_QUERY")
	info, err := s.eng.InspectKey(topic, key)
	if err != nil {
		return engineErr(err, respQueryNotFound)
	}
	if info.State == engine.StateCancelled || (uniq && info.Properties[propUniqKey] != key) {
		return errResp(respQueryNotFound, fmt.Sprintf("no message with key %q in topic %q", key, topic))
	}
	body, _, err := s.eng.Peek(info.ID, s.opts.Limits.MaxBodyBytes)
	if err != nil {
		return engineErr(err, respQueryNotFound)
	}
	v := &engine.Visible{ID: info.ID, Visible: info.Visible, Due: info.Due, Message: &message.Stored{
		Message: message.Message{Topic: info.Topic, Key: info.Key, Tag: info.Tag, Properties: info.Properties, Body: body},
		Queue:   info.Queue, Sent: info.Sent}}
	w := s.wire(c, info.Topic, info.Queue, v)
	w.commitOffset = int64(info.ID.Pos)
	if w.storeTimestamp == 0 {
		w.storeTimestamp = info.Sent
	}
	return &Command{Code: respSuccess, Body: appendWire(nil, w), ExtFields: map[string]string{
		"indexLastUpdateTimestamp": strconv.FormatInt(s.eng.Now(), 10), "indexLastUpdatePhyoffset": "0"}}
}
