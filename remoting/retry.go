package remoting

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// sendBack answers CONSUMER_SEND_MSG_BACK, a consumer's "reconsume later":
// a copy of the message goes to the group's retry topic %RETRY%<group>, due
// after delay level 3 + its reconsume count (or the level asked for), so
// only that group consumes it again; once the count reaches the group's
// maximum (or the level asked is negative), to %DLQ%<group> instead. The
// copy keeps the body, tag, keys and properties, adds RETRY_TOPIC and
// ORIGIN_MESSAGE_ID, and counts the reconsume.
func (s *Server) sendBack(c *conn, req *Command) *Command {
	f := &fields{m: req.ExtFields}
	group := f.str("group")
	handle := f.int64("offset")
	level := int(f.optInt64("delayLevel", 0))
	originID := f.opt("originMsgId")
	originTopic := f.opt("originTopic")
	maxTimes := int(f.optInt64("maxReconsumeTimes", 16))
	if f.err == nil {
		f.err = checkTopic(retryPrefix + group)
	}
	if f.err != nil {
		return badRequest(f.err)
	}
	v, topic := s.findSentBack(handle, originID, originTopic, group)
	if v == nil {
		return errResp(respSystemError, fmt.Sprintf("no message at offset %d with ID %q in topic %q or %q", handle, originID, originTopic, retryPrefix+group))
	}
	m := v.Message
	props := maps.Clone(m.Properties)
	if props == nil {
		props = map[string]string{}
	}
	times, _ := strconv.Atoi(props[hidReconsume])
	if _, ok := props[propRetryTopic]; !ok {
		props[propRetryTopic] = topic
	}
	if _, ok := props[propOriginMsgID]; !ok {
		if originID == "" {
			originID = props[propUniqKey]
		}
		props[propOriginMsgID] = originID
	}
	props[hidReconsume] = strconv.Itoa(times + 1)
	delete(props, propTimerOutMs)
	out := message.Message{Topic: retryPrefix + group, Key: m.Key, Tag: m.Tag, Properties: props, Body: m.Body,
		DedupID: retryDedupID(props[propUniqKey], times+1)}
	var w message.When
	internal := false
	if level < 0 || times >= maxTimes {
		out.Topic, internal = dlqTopicOf(group), true
		props[propDLQOriginTopic], props[propDLQOriginMsgID] = topic, props[propOriginMsgID]
		delete(props, propDelay)
	} else {
		if level == 0 {
			level = 3 + times
		}
		// As a send's level (a retried timer message loses its timer
		// properties).
		props[propDelay] = strconv.Itoa(level)
		w = s.levelWhen(props, level, out.Topic, 0)
	}
	reqs := []engine.SendRequest{{Message: out, When: w, SystemProperties: systemOf(props)}}
	if _, ok := s.storedElsewhere(reqs, retryPrefix+group); ok {
		return okResp(nil)
	}
	if _, err := s.sendEngine(reqs, internal); err != nil {
		return engineErr(err, respTopicNotExist)
	}
	return okResp(nil)
}

// findSentBack finds the message a send-back names by its handle (queue
// and offset) in the topic the consumer pulled it from: the origin topic,
// or the group's retry topic for a message already retried (the clients
// name its origin topic). The handle is sealed in its topic's domain
// (commitHandle), so only a handle a pull gave out names a message, and
// only in the topic it was given for; the message ID must match too.
// Another group's retry topic, or a message for another group, is never
// sent back for this one.
func (s *Server) findSentBack(handle int64, id, originTopic, group string) (*engine.Visible, string) {
	for _, topic := range []string{originTopic, retryPrefix + group} {
		if topic == "" || (strings.HasPrefix(topic, retryPrefix) && topic != retryPrefix+group) {
			continue
		}
		q, off := s.splitHandle(topic, handle)
		if n, _, ok := s.eng.TopicKind(topic); !ok || q >= n {
			continue
		}
		vs, err := s.eng.ReadQueue(topic, q, off, 1)
		if err != nil || len(vs) == 0 || vs[0].Offset != off {
			continue
		}
		if fg := vs[0].Message.ForGroup; fg != "" && fg != group {
			continue
		}
		uniq := vs[0].Message.Properties[propUniqKey]
		if uniq == id || uniq == "" {
			return &vs[0], topic
		}
	}
	return nil, ""
}
