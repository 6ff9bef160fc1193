package client

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/hourglass-mq/hourglass/api"
)

// A producer sending one message per request reads a receipt per
// message; through encoding/json's Decoder that cost a buffer, a scan to
// find the value's end and a reflective decode each time. receiptAnswer
// reads it in one pass over the pooled buffer of readBody, in the shape
// the broker writes it; anything else falls back to encoding/json, so
// every valid answer is read the same either way.
// TestReceiptDecodeMatchesJSON holds the two to the same results.

// receiptAnswer is the answer to a send, decoded into r.
type receiptAnswer struct{ r *Receipt }

func (a receiptAnswer) decodeRaw(b []byte) error {
	s := scan{b: b}
	var r Receipt
	if s.receipt(&r, nil) {
		if s.ws(); s.i == len(s.b) {
			*a.r = r
			return nil
		}
	}
	return json.Unmarshal(b, a.r)
}

// batchAnswer is the answer to a batch send; n, the messages sent, sizes
// the receipts.
type batchAnswer struct {
	out *api.BatchReceipts
	n   int
}

func (a batchAnswer) decodeRaw(b []byte) error {
	s := scan{b: b}
	var out api.BatchReceipts
	ok := s.object(func(key []byte) bool {
		if string(key) != "receipts" || !s.next('[') {
			return false
		}
		out.Receipts = make([]Receipt, 0, a.n)
		if s.next(']') {
			return true
		}
		var same repeats
		for {
			var r Receipt
			if !s.receipt(&r, &same) {
				return false
			}
			out.Receipts = append(out.Receipts, r)
			if !s.next(',') {
				return s.next(']')
			}
		}
	})
	if ok {
		if s.ws(); s.i == len(s.b) {
			*a.out = out
			return nil
		}
	}
	return json.Unmarshal(b, a.out)
}

// repeats holds the last topic and due_time that a batch's receipts (or
// a send stream's answers, read by its one reader) gave:
// they mostly repeat from one receipt to the next, and each string of its
// own was an allocation.
type repeats struct{ topic, due string }

// again returns last if raw spells it, or else a new string, which
// becomes last.
func again(raw []byte, last *string) string {
	if string(raw) != *last {
		*last = string(raw)
	}
	return *last
}

// receipt reads one api.Receipt: its known members, each a string, a
// non-negative integer or true/false as its type says.
func (s *scan) receipt(r *Receipt, same *repeats) bool {
	var topic, due *string // the last ones, if same is given
	if same != nil {
		topic, due = &same.topic, &same.due
	}
	return s.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "id":
			r.ID, ok = s.str()
		case "topic":
			r.Topic, ok = s.repeated(topic)
		case "due_time":
			r.DueTime, ok = s.repeated(due)
		case "queue":
			var n int64
			n, ok = s.int()
			r.Queue = int(n)
			ok = ok && n <= math.MaxInt32
		case "due":
			var n int64
			n, ok = s.int()
			r.Due = api.Millis(n)
		case "duplicate":
			ok = s.boolean(&r.Duplicate)
		}
		return ok
	})
}

// boolean reads true or false.
func (s *scan) boolean(v *bool) bool {
	s.ws()
	switch {
	case bytes.HasPrefix(s.b[s.i:], []byte("true")):
		s.i += 4
		*v = true
	case bytes.HasPrefix(s.b[s.i:], []byte("false")):
		s.i += 5
		*v = false
	default:
		return false
	}
	return true
}

// repeated is str, through again with last when last is not nil.
func (s *scan) repeated(last *string) (string, bool) {
	if last == nil {
		return s.str()
	}
	raw, escaped, ok := s.token()
	if !ok || !escaped {
		return again(raw, last), ok
	}
	return s.unescape(raw)
}
