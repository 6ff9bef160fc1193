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
	if s.receipt(&r) {
		if s.ws(); s.i == len(s.b) {
			*a.r = r
			return nil
		}
	}
	return json.Unmarshal(b, a.r)
}

// batchAnswer is the answer to a batch send.
type batchAnswer struct{ out *api.BatchReceipts }

func (a batchAnswer) decodeRaw(b []byte) error {
	s := scan{b: b}
	var out api.BatchReceipts
	ok := s.object(func(key []byte) bool {
		if string(key) != "receipts" || !s.next('[') {
			return false
		}
		out.Receipts = []Receipt{}
		if s.next(']') {
			return true
		}
		for {
			var r Receipt
			if !s.receipt(&r) {
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

// receipt reads one api.Receipt: its known members, each a string, a
// non-negative integer or true/false as its type says.
func (s *scan) receipt(r *Receipt) bool {
	return s.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "id":
			r.ID, ok = s.str()
		case "topic":
			r.Topic, ok = s.str()
		case "due_time":
			r.DueTime, ok = s.str()
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
