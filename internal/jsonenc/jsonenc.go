// Package jsonenc appends JSON strings byte for byte as encoding/json
// writes them, for the hand-written encoders of the hot answers and
// requests (the broker's receipts and receive answers, the client's
// sends): encoding/json's reflection and its buffer cost more than the
// bytes they produce there. PlainEnd serves the hand-written decoders
// of the same paths.
package jsonenc

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"unicode/utf8"
	"unsafe"
)

const hexDigits = "0123456789abcdef"

// jsonPlain tells the ASCII bytes a JSON string holds as they are: one
// table lookup per byte in the loop over a body, not six comparisons.
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// Eight bytes at a time: a body is mostly plain ASCII, and testing a
// word for the few bytes that need escaping is cheaper than eight table
// lookups. With every byte below 0x80 (no high bit), (w - n*lsb) &^ w &
// msb is non-zero exactly when some byte of w is below n; a byte equal to
// c is a zero byte of w ^ c*lsb.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// PlainEnd is the index of the first byte of b that ends the plain
// stretch of a JSON string: a quote, a backslash, a control character or
// a byte of a multi-byte UTF-8 sequence; len(b) if there is none. A
// decoder's fast path reads a string as b[:PlainEnd(b)] when the byte
// there is its closing quote, and takes its slow path otherwise.
//
// Eight bytes at a time, as plain8: a byte equal to c is a zero byte of
// x = w ^ c*lsb, (x - lsb) &^ x & msb flags the zero bytes of x, and w &
// msb the bytes from 0x80. A flag can be wrong only above a byte rightly
// flagged (a borrow travels upwards), so the lowest flag is exact.
func PlainEnd(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q, bs := w^'"'*lsb, w^'\\'*lsb
		if m := ((q-lsb)&^q | (bs-lsb)&^bs | (w-0x20*lsb)&^w | w) & msb; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
}

// plain8 reports whether the 8 bytes of s are all ASCII that a JSON
// string holds as they are (jsonPlain).
func plain8(s string) bool {
	w := binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s), 8))
	q, bs, lt, gt, amp := w^'"'*lsb, w^'\\'*lsb, w^'<'*lsb, w^'>'*lsb, w^'&'*lsb
	bad := w | (w-0x20*lsb)&^w |
		(q-lsb)&^q | (bs-lsb)&^bs | (lt-lsb)&^lt | (gt-lsb)&^gt | (amp-lsb)&^amp
	return bad&msb == 0
}

// AppendString appends s as a JSON string the way encoding/json
// writes it: ", \ and control characters escaped, <, > and & as \u00XX,
// U+2028 and U+2029 escaped, and each byte of invalid UTF-8 as U+FFFD.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plain8(s[i:i+8]) {
			i += 8
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			if jsonPlain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
				b = append(b, `\ufffd`...)
			} else {
				b = fmt.Appendf(b, `\u%04x`, r)
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendStringMap appends m as a JSON object, its keys sorted by byte as
// encoding/json sorts a map's, each key and value escaped as AppendString
// does: what encoding/json.Marshal gives for a map[string]string that is
// not empty (a nil or empty map gives {}).
func AppendStringMap(b []byte, m map[string]string) []byte {
	var inline [16]string // headers and properties rarely have more keys
	keys := inline[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(AppendString(b, k), ':')
		b = AppendString(b, m[k])
	}
	return append(b, '}')
}
