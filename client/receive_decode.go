package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/internal/jsonenc"
)

// A receive answer is the largest and most frequent body the client
// reads: up to 1000 messages, each with a body. encoding/json scans it
// twice (once to find its end, once to decode, through its state machine)
// and, for body_base64, decodes the base64 from an intermediate string.
// The reader here takes the answer in one pass over a pooled buffer, in
// the shape the broker writes it; anything else (white space is fine, but
// an unknown field, a null or a number with a fraction is not) falls back
// to encoding/json, so every valid answer is read the same either way.
// TestReceiveDecodeMatchesJSON holds the two to the same results.

// rawDecoder is a response value that reads the whole body itself.
type rawDecoder interface{ decodeRaw(body []byte) error }

// bodyBufs recycles the buffers answers are read into. Nothing decoded
// points into them: every string and body is copied out.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody keeps a buffer that once read a huge answer from being
// kept.
const maxPooledBody = 1 << 20

// readBody reads a 2xx body whole and hands it to rd.
func readBody(resp *http.Response, rd rawDecoder) error {
	buf := bodyBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBody {
			bodyBufs.Put(buf)
		}
	}()
	if n := resp.ContentLength; n > 0 && n <= maxPooledBody {
		buf.Grow(int(n))
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	return rd.decodeRaw(buf.Bytes())
}

// receiveAnswer is api.ReceiveResponse holding the client's Received.
type receiveAnswer struct {
	Messages []Received `json:"messages"`
	Acked    int        `json:"acked"`
}

func (a *receiveAnswer) decodeRaw(b []byte) error {
	s := scan{b: b}
	if s.receiveAnswer(a) {
		if s.ws(); s.i == len(s.b) {
			return nil
		}
	}
	*a = receiveAnswer{}
	return json.Unmarshal(b, a)
}

// scan is a position in a JSON text. Its methods return false where the
// text is not what they expect; the caller then falls back.
type scan struct {
	b     []byte
	i     int
	names map[string]string // the property names read so far (name)
}

// maxNames bounds the property names one answer's scan keeps.
const maxNames = 64

// name is key as a string: one already made for the same bytes in this
// answer, if any. Property names repeat from message to message, and
// each was a string of its own.
func (s *scan) name(key []byte) string {
	if n, ok := s.names[string(key)]; ok {
		return n
	}
	n := string(key)
	if len(s.names) < maxNames {
		if s.names == nil {
			s.names = make(map[string]string)
		}
		s.names[n] = n
	}
	return n
}

func (s *scan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// next moves past c, after white space, if c is next.
func (s *scan) next(c byte) bool {
	if s.ws(); s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null moves past a null, if one is next.
func (s *scan) null() bool {
	if s.ws(); bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// token reads a string and returns the bytes between its quotes, and
// whether they hold an escape.
func (s *scan) token() (raw []byte, escaped, ok bool) {
	if !s.next('"') {
		return nil, false, false
	}
	start := s.i
	// Most strings are printable ASCII: one pass, eight bytes at a time,
	// to the closing quote (jsonenc.PlainEnd). The others go on from
	// where that pass stopped (the bytes before are plain): jump to the
	// closing quote and check the bytes before it (IndexByte is
	// vectorised; the loop below is once per byte, without branches).
	n := start + jsonenc.PlainEnd(s.b[start:])
	if n < len(s.b) && s.b[n] == '"' {
		s.i = n + 1
		return s.b[start:n], false, true
	}
	s.i = n
	if q := bytes.IndexByte(s.b[n:], '"'); q >= 0 {
		rest := s.b[n : n+q]
		if bytes.IndexByte(rest, '\\') < 0 {
			for _, c := range rest {
				if c < 0x20 {
					return nil, false, false
				}
			}
			s.i = n + q + 1
			return s.b[start : n+q], false, utf8.Valid(rest)
		}
	}
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], escaped, utf8.Valid(s.b[n : s.i-1])
		case c == '\\':
			escaped = true
			s.i += 2
		case c < 0x20:
			return nil, false, false
		default:
			s.i++
		}
	}
	return nil, false, false
}

// bytes reads a string as its unescaped bytes, copied.
func (s *scan) bytes() ([]byte, bool) {
	raw, escaped, ok := s.token()
	if !ok || !escaped {
		return bytes.Clone(raw), ok
	}
	var v string
	if json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &v) != nil {
		return nil, false
	}
	return []byte(v), true
}

func (s *scan) str() (string, bool) {
	raw, escaped, ok := s.token()
	if !ok || !escaped {
		return string(raw), ok
	}
	return s.unescape(raw)
}

// unescape is the string of raw, the token just read, which holds an
// escape: encoding/json reads it, quotes and all.
func (s *scan) unescape(raw []byte) (string, bool) {
	var v string
	return v, json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &v) == nil
}

// uint reads a non-negative integer.
func (s *scan) uint() (uint64, bool) {
	s.ws()
	start := s.i
	var v uint64
	for ; s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9'; s.i++ {
		d := uint64(s.b[s.i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	// A fraction, an exponent or a leading zero: the general decoder's.
	if s.i == start || s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') || s.b[start] == '0' && s.i-start > 1 {
		return 0, false
	}
	return v, true
}

// int reads a non-negative integer that fits an int64.
func (s *scan) int() (int64, bool) {
	v, ok := s.uint()
	return int64(v), ok && v <= math.MaxInt64
}

// object reads an object, calling member for each key with s just past
// the colon; member reads the value.
func (s *scan) object(member func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		key, escaped, ok := s.token()
		if !ok || escaped || !s.next(':') || !member(key) {
			return false
		}
		if !s.next(',') {
			return s.next('}')
		}
	}
}

func (s *scan) receiveAnswer(a *receiveAnswer) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "messages":
			if !s.next('[') {
				return false
			}
			a.Messages = []Received{}
			if s.next(']') {
				return true
			}
			for {
				var r Received
				if !s.received(&r) {
					return false
				}
				a.Messages = append(a.Messages, r)
				if !s.next(',') {
					return s.next(']')
				}
			}
		case "acked":
			n, ok := s.int()
			a.Acked = int(n)
			return ok && n <= math.MaxInt32
		}
		return false
	})
}

// received reads one message with Received.UnmarshalJSON's rule:
// body_base64, when not empty, wins over body.
func (s *scan) received(r *Received) bool {
	var text, b64 []byte
	ok := s.object(func(key []byte) bool {
		var ok bool
		var n int64
		switch string(key) {
		case "id", "receipt", "key", "tag", "group":
			*r.textField(key[0]), ok = s.str()
		case "attempt", "queue", "due", "visible":
			n, ok = s.int()
			r.setInt(key[0], n)
		case "offset":
			r.Offset, ok = s.uint()
		case "body":
			text, ok = s.bytes()
		case "body_base64":
			var escaped bool
			b64, escaped, ok = s.token()
			ok = ok && !escaped
		case "properties":
			ok = s.properties(r)
		}
		return ok
	})
	switch {
	case !ok:
		return false
	case len(b64) > 0:
		body := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
		n, err := base64.StdEncoding.Decode(body, b64)
		r.Body = body[:n]
		return err == nil
	case text != nil:
		r.Body = text
	}
	return true
}

func (s *scan) properties(r *Received) bool {
	if s.null() {
		return true
	}
	r.Properties = map[string]string{}
	return s.object(func(key []byte) bool {
		v, ok := s.str()
		r.Properties[s.name(key)] = v
		return ok
	})
}

// textField is the string field of the key that starts with c (id,
// receipt, key, tag or group).
func (r *Received) textField(c byte) *string {
	switch c {
	case 'i':
		return &r.ID
	case 'r':
		return &r.Receipt
	case 'k':
		return &r.Key
	case 't':
		return &r.Tag
	}
	return &r.Group
}

// setInt sets the integer field of the key that starts with c (attempt,
// queue, due or visible).
func (r *Received) setInt(c byte, n int64) {
	switch c {
	case 'a':
		r.Attempt = int(n)
	case 'q':
		r.Queue = int(n)
	case 'd':
		r.Due = Millis(n)
	default:
		r.Visible = Millis(n)
	}
}
