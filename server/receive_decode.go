package server

import (
	"bytes"
	"encoding/binary"

	"github.com/hourglass-mq/hourglass/api"
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

// str reads a string of printable ASCII other than the backslash.
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
	// The string ends at the first quote: a quote escaped would follow a
	// backslash, which printable refuses.
	q := bytes.IndexByte(s.b[s.i:], '"')
	if q < 0 || !printable(s.b[s.i:s.i+q]) {
		return nil, false
	}
	raw := s.b[s.i : s.i+q]
	s.i += q + 1
	return raw, true
}

// Eight bytes at a time (the loop over a body was the decoder's largest
// cost): with lsb and msb the lowest and highest bit of every byte,
// (w - n*lsb) &^ w & msb is non-zero if and only if some byte of w is
// below n (for n <= 0x80), (w + (0x7f-n)*lsb | w) & msb if some byte is
// above n, and a byte equal to c is a zero byte of w ^ c*lsb.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// printable reports whether b is all printable ASCII (0x20 to 0x7e) other
// than the backslash.
func printable(b []byte) bool {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		bs := w ^ '\\'*lsb
		if ((w-0x20*lsb)&^w|(w+(0x7f-0x7e)*lsb|w)|(bs-lsb)&^bs)&msb != 0 {
			return false
		}
	}
	for _, c := range b[i:] {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
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
