package server

import (
	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/internal/jsonenc"
)

// A consumer sends a receive request per batch, carrying the receipts of
// the batch before (up to 1000, about 30 bytes each). The general decoder
// (encoding/json by reflection, then the strict walk of checkStrict) read
// such a body twice; readReceiveFast takes the common shape in one pass:
// an object whose members are max (digits), invisible, wait, body_encoding
// (strings) and ack (an array of strings), each at most once, with
// strings of printable ASCII without escapes, in any order and with any
// JSON white space. Anything else (an escape, a null, a duplicate or
// unknown key, a sign or fraction, trailing data) is left to decodeBody,
// which gives every other body its meaning or its error.
// TestReadReceiveFastMatchesDecode and FuzzReadReceiveFast hold the two
// to the same result.

// readReceiveFast decodes body into in and reports true, or reports false
// and leaves in as it was.
func readReceiveFast(body []byte, in *api.ReceiveRequest) bool {
	s := reqScan{b: body}
	var out api.ReceiveRequest
	var seen [5]bool
	if !s.next('{') {
		return false
	}
	if !s.next('}') {
		for {
			key, ok := s.raw()
			if !ok || !s.next(':') {
				return false
			}
			var k int
			switch string(key) {
			case "max":
				k, ok = 0, s.small(&out.Max)
			case "invisible":
				k = 1
				out.Invisible, ok = s.str()
			case "wait":
				k = 2
				out.Wait, ok = s.str()
			case "body_encoding":
				k = 3
				var v string
				v, ok = s.str()
				out.BodyEncoding = api.BodyEncoding(v)
			case "ack":
				k, ok = 4, s.strings(&out.Ack)
			default:
				return false
			}
			if !ok || seen[k] {
				return false
			}
			seen[k] = true
			if !s.next(',') {
				if !s.next('}') {
					return false
				}
				break
			}
		}
	}
	if s.ws(); s.i != len(s.b) {
		return false
	}
	*in = out
	return true
}

// reqScan is a position in a request body; its methods report false
// where the body is not of the fast shape.
type reqScan struct {
	b []byte
	i int
}

func (s *reqScan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *reqScan) next(c byte) bool {
	if s.ws(); s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string of ASCII without escapes or control characters.
func (s *reqScan) str() (string, bool) {
	raw, ok := s.raw()
	return string(raw), ok
}

// raw is str without the string: the bytes between the quotes, for a
// member name looked up (m[string(raw)] allocates nothing) or compared.
func (s *reqScan) raw() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	n := s.i + jsonenc.PlainEnd(s.b[s.i:])
	if n == len(s.b) || s.b[n] != '"' {
		return nil, false // an escape, a control or non-ASCII byte, or no end
	}
	raw := s.b[s.i:n]
	s.i = n + 1
	return raw, true
}

// small reads a non-negative integer of at most 9 digits, without a
// leading zero (the limits are checked later; a larger one is left to
// the general decoder).
func (s *reqScan) small(v *int) bool {
	s.ws()
	start, n := s.i, 0
	for ; s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9'; s.i++ {
		n = n*10 + int(s.b[s.i]-'0')
	}
	d := s.i - start
	if d == 0 || d > 9 || d > 1 && s.b[start] == '0' {
		return false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return false
	}
	*v = n
	return true
}

// strings reads an array of strings.
func (s *reqScan) strings(v *[]string) bool {
	if !s.next('[') {
		return false
	}
	out := []string{}
	if !s.next(']') {
		for {
			r, ok := s.str()
			if !ok {
				return false
			}
			out = append(out, r)
			if !s.next(',') {
				if !s.next(']') {
					return false
				}
				break
			}
		}
	}
	*v = out
	return true
}
