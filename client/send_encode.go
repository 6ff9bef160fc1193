package client

import (
	"slices"
	"strconv"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/internal/jsonenc"
)

// A producer encodes a message per send; encoding/json did it by
// reflection into a fresh buffer. appendSendMessage writes the same bytes
// by hand (TestSendEncodingMatchesJSON holds it to encoding/json's).

// jsonAppender is a request value that encodes itself.
type jsonAppender interface{ appendJSON(b []byte) []byte }

// sendBody is the body of a send: one api.SendMessage.
type sendBody struct{ m *api.SendMessage }

func (s sendBody) appendJSON(b []byte) []byte {
	return appendSendMessage(slices.Grow(b, messageSize(s.m)), s.m)
}

// batchBody is the body of a batch send: an api.BatchRequest.
type batchBody struct{ r *api.BatchRequest }

func (s batchBody) appendJSON(b []byte) []byte {
	if s.r.Messages == nil {
		return append(b, `{"messages":null}`...)
	}
	n := 16
	for i := range s.r.Messages {
		n += messageSize(&s.r.Messages[i])
	}
	b = append(slices.Grow(b, n), `{"messages":[`...)
	for i := range s.r.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSendMessage(b, &s.r.Messages[i])
	}
	return append(b, "]}"...)
}

// messageSize is about the length of m's JSON when nothing in it needs an
// escape: what a request's buffer is made with, so that it is not grown
// (and copied) several times over a batch of bodies.
func messageSize(m *api.SendMessage) int {
	n := 128 + len(m.Key) + len(m.Tag) + len(m.Group) + len(m.DedupID) + len(m.TTL) + len(m.Delay)
	if m.Body != nil {
		n += len(*m.Body)
	}
	if m.BodyBase64 != nil {
		n += len(*m.BodyBase64)
	}
	for k, v := range m.Properties {
		n += len(k) + len(v) + 6
	}
	return n
}

// member appends a member's key, after a comma unless it is the first.
func member(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendString appends a string member unless it is empty (omitempty).
func appendString(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return jsonenc.AppendString(member(b, name), v)
}

// appendInt appends an integer member unless it is 0 (omitempty).
func appendInt(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(member(b, name), v, 10)
}

// appendSendMessage appends m as encoding/json writes it: the members in
// the type's order (Delivery's, embedded, last), the empty ones left out,
// the properties in key order.
func appendSendMessage(b []byte, m *api.SendMessage) []byte {
	b = append(b, '{')
	b = appendString(b, "key", m.Key)
	b = appendString(b, "tag", m.Tag)
	b = appendString(b, "group", m.Group)
	if len(m.Properties) > 0 {
		b = jsonenc.AppendStringMap(member(b, "properties"), m.Properties)
	}
	if m.Body != nil {
		b = jsonenc.AppendString(member(b, "body"), *m.Body)
	}
	if m.BodyBase64 != nil {
		b = jsonenc.AppendString(member(b, "body_base64"), *m.BodyBase64)
	}
	b = appendString(b, "dedup_id", m.DedupID)
	b = appendInt(b, "deadline", int64(m.Deadline))
	b = appendString(b, "ttl", m.TTL)
	b = appendInt(b, "window", m.Window)
	b = appendString(b, "delay", m.Delay)
	b = appendInt(b, "at", int64(m.At))
	b = appendInt(b, "level", int64(m.Level))
	return append(b, '}')
}
