package server

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
)

// A producer sending one message per request pays the request's fixed
// costs once per message, and the general decoder (encoding/json by
// reflection, then the strict walk of checkStrict) read every body twice:
// a CPU profile of 64 producers over HTTP put a quarter of the handler's
// time in it (issue 31). readSendFast takes the common shape of a message
// in one pass: an object whose members are key, tag, group, body,
// body_base64, dedup_id, ttl, delay (strings), deadline, at (non-negative
// integers of at most 18 digits), window and level (the same, at most 9
// digits), each at most once, in any order, with strings of printable
// ASCII without escapes. Anything else (properties, an escape, a null,
// non-ASCII text, a sign or fraction, a duplicate or unknown key,
// trailing data) is left to decodeBody, which gives every other body its
// meaning or its error, so that no error message changes.
// TestReadSendFastMatchesDecode and FuzzReadSendFast hold the two to the
// same result.

// readSendFast decodes body into in and reports true, or reports false
// and leaves in as it was.
func readSendFast(body []byte, in *api.SendMessage) bool {
	s := reqScan{b: body}
	var out api.SendMessage
	if !s.message(&out) {
		return false
	}
	if s.ws(); s.i != len(s.b) {
		return false
	}
	*in = out
	return true
}

// readBatchFast is readSendFast for a batch: an object whose only member
// is messages, an array of messages of readSendFast's shape. The
// messages are appended to in.Messages[:0] (a buffer of batchBuffers);
// when it refuses the body, in is as it was, its buffer cleared.
func readBatchFast(body []byte, in *api.BatchRequest) bool {
	msgs, ok := scanBatch(reqScan{b: body}, in.Messages[:0])
	if !ok {
		// Both arrays: past the buffer's capacity the scan moved to
		// another, and the buffer keeps what it read before that.
		clear(msgs)
		clear(in.Messages[:cap(in.Messages)])
		return false
	}
	in.Messages = msgs
	return true
}

// scanBatch is readBatchFast's reading, appending to msgs.
func scanBatch(s reqScan, msgs []api.SendMessage) ([]api.SendMessage, bool) {
	if !s.next('{') {
		return msgs, false
	}
	if key, ok := s.raw(); !ok || string(key) != "messages" || !s.next(':') || !s.next('[') {
		return msgs, false
	}
	if msgs == nil {
		msgs = make([]api.SendMessage, 0, 16)
	}
	if !s.next(']') {
		for {
			msgs = append(msgs, api.SendMessage{})
			if !s.message(&msgs[len(msgs)-1]) {
				return msgs, false
			}
			if !s.next(',') {
				if !s.next(']') {
					return msgs, false
				}
				break
			}
		}
	}
	if !s.next('}') {
		return msgs, false
	}
	s.ws()
	return msgs, s.i == len(s.b)
}

// sendKeys numbers the members readSendFast takes, to refuse duplicates.
var sendKeys = map[string]int{
	"key": 0, "tag": 1, "group": 2, "body": 3, "body_base64": 4, "dedup_id": 5,
	"ttl": 6, "delay": 7, "deadline": 8, "at": 9, "window": 10, "level": 11,
}

// message reads one message object of readSendFast's shape into m.
func (s *reqScan) message(m *api.SendMessage) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	var seen [12]bool
	for {
		key, ok := s.raw()
		if !ok || !s.next(':') {
			return false
		}
		k, known := sendKeys[string(key)]
		if !known || seen[k] {
			return false
		}
		seen[k] = true
		if !s.sendMember(k, m) {
			return false
		}
		if !s.next(',') {
			return s.next('}')
		}
	}
}

// sendMember reads the value of member k (see sendKeys) into m.
func (s *reqScan) sendMember(k int, m *api.SendMessage) bool {
	var ok bool
	switch k {
	case 0:
		m.Key, ok = s.str()
	case 1:
		m.Tag, ok = s.str()
	case 2:
		m.Group, ok = s.str()
	case 3, 4:
		var v string
		if v, ok = s.str(); ok && k == 3 {
			m.Body = &v
		} else if ok {
			m.BodyBase64 = &v
		}
	case 5:
		m.DedupID, ok = s.str()
	case 6:
		m.TTL, ok = s.str()
	case 7:
		m.Delay, ok = s.str()
	case 8, 9:
		var v int64
		if ok = s.nonNegative(&v, 18); ok && k == 8 {
			m.Deadline = api.Millis(v)
		} else if ok {
			m.At = api.Millis(v)
		}
	case 10:
		var v int64
		ok = s.nonNegative(&v, 9)
		m.Window = v
	case 11:
		ok = s.small(&m.Level)
	}
	return ok
}

// nonNegative reads a non-negative integer of at most digits digits
// (at most 18, so that it fits an int64), without a leading zero.
func (s *reqScan) nonNegative(v *int64, digits int) bool {
	s.ws()
	start := s.i
	var n int64
	for ; s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9'; s.i++ {
		n = n*10 + int64(s.b[s.i]-'0')
	}
	d := s.i - start
	if d == 0 || d > digits || d > 1 && s.b[start] == '0' {
		return false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return false
	}
	*v = n
	return true
}

// batchBuffers recycles the messages of batch requests (a send request
// is about 200 bytes before its strings: a batch of 100 grew its slice
// five times). maxPooledBatch keeps a large batch's from staying pinned.
var batchBuffers = sync.Pool{New: func() any { b := make([]api.SendMessage, 0, 128); return &b }}

const maxPooledBatch = 1024

// takeBatch is an empty messages slice from batchBuffers.
func takeBatch() *[]api.SendMessage { return batchBuffers.Get().(*[]api.SendMessage) }

// putBatch gives msgs back to batchBuffers through p, cleared
// (clearBatch), unless it is too large to keep.
func putBatch(p *[]api.SendMessage, msgs []api.SendMessage) {
	if msgs = clearBatch(msgs); msgs != nil {
		*p = msgs
		batchBuffers.Put(p)
	}
}

// clearBatch is msgs emptied, its whole capacity zeroed (its strings and
// maps go to the collector), or nil when it is too large to keep or has
// no room at all (encoding/json's answer to "messages":[]).
func clearBatch(msgs []api.SendMessage) []api.SendMessage {
	if cap(msgs) == 0 || cap(msgs) > maxPooledBatch {
		return nil
	}
	clear(msgs[:cap(msgs)])
	return msgs[:0]
}

// receiptBufs recycles the buffers send answers are written into.
var receiptBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledReceipts keeps the answer to a large batch from pinning its
// buffer in the pool.
const maxPooledReceipts = 64 << 10

// jsonContentType is the Content-Type of every JSON answer, shared so
// that setting it allocates nothing (net/http only reads it).
var jsonContentType = []string{"application/json"}

// writeReceipts answers a send with 200 and the JSON encoding/json makes
// of api.Receipt (one) or api.BatchReceipts (batch) of receiptOf(rcs),
// written by hand: the hot answer of every send.
// TestWriteReceiptsMatchesJSON holds it to encoding/json's output.
func writeReceipts(w http.ResponseWriter, rcs []engine.Receipt, batch bool) {
	bp := receiptBufs.Get().(*[]byte)
	b := (*bp)[:0]
	var dues dueTexts
	if batch {
		b = append(b, `{"receipts":[`...)
		for i := range rcs {
			if i > 0 {
				b = append(b, ',')
			}
			b = dues.appendReceipt(b, &rcs[i])
		}
		b = append(b, "]}\n"...)
	} else {
		b = append(dues.appendReceipt(b, &rcs[0]), '\n')
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	if cap(b) <= maxPooledReceipts {
		*bp = b
		receiptBufs.Put(bp)
	}
}

// dueTexts remembers where in an answer the last due_time was written:
// the messages of a batch mostly share their due time, and formatting
// one (time.Time.AppendFormat) cost more than the rest of its receipt.
type dueTexts struct {
	due        int64
	start, end int // b[start:end] is the quoted text of due; end 0: none yet
}

// appendReceipt appends the JSON of receiptOf(*r), its fields in
// api.Receipt's order, to b. The bytes d last wrote (b[d.start:d.end])
// must be unchanged since: b only grew, or d is new.
func (d *dueTexts) appendReceipt(b []byte, r *engine.Receipt) []byte {
	b = append(b, `{"id":"`...)
	b = r.ID.Append(b)
	b = append(b, `","topic":`...)
	b = appendJSONString(b, r.Topic)
	b = append(b, `,"queue":`...)
	b = strconv.AppendInt(b, int64(r.Queue), 10)
	b = append(b, `,"due":`...)
	b = strconv.AppendInt(b, r.Due, 10)
	b = append(b, `,"due_time":`...)
	if d.end > 0 && d.due == r.Due {
		b = append(b, b[d.start:d.end]...)
	} else {
		// RFC 3339 text has nothing JSON escapes.
		d.due, d.start = r.Due, len(b)
		b = append(api.Millis(r.Due).AppendRFC3339(append(b, '"')), '"')
		d.end = len(b)
	}
	if r.Duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, '}')
}
