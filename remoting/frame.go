package remoting

import (
	"github.com/hourglass-mq/hourglass/access"

	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// A frame on the wire (all integers big-endian):
//
//	int32  length          bytes after this field: 4 + header length + body length
//	byte   serialize type  0 JSON, 1 ROCKETMQ (binary)
//	uint24 header length
//	[]byte header          a command without its body, in the serialize type
//	[]byte body            the rest of the frame
//
// The ROCKETMQ header is:
//
//	int16 code, byte language, int16 version, int32 opaque, int32 flag,
//	int32 remark length, remark, int32 extFields length, then per field
//	int16 key length, key, int32 value length, value.
//
// These layouts are RocketMQ's remoting protocol and must not change.
const (
	serializeJSON     byte = 0
	serializeRocketMQ byte = 1

	// flagResponse marks a response; flagOneway a request that wants none.
	flagResponse int32 = 1
	flagOneway   int32 = 2
)

// Command is one request or response of the remoting protocol.
type Command struct {
	Code      int32             `json:"code"`
	Language  string            `json:"language"`
	Version   int32             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
	// Serialize is the header encoding the command came in (and its
	// response goes out) in: serializeJSON or serializeRocketMQ.
	Serialize byte   `json:"-"`
	Body      []byte `json:"-"`
	// release, when set on a response, is called once it is written or
	// dropped: what its handler holds of the connection until then.
	release func()
	// principal is who a request acts as, set by authorize before
	// dispatch (nil on responses and before authorization).
	principal *access.Principal
}

// Limits bound what one frame may hold.
type Limits struct {
	// MaxFrame bounds a frame's length field (header and body).
	MaxFrame int
	// MaxHeader bounds a frame's header.
	MaxHeader int
	// MaxExtFields bounds the number of a header's extFields.
	MaxExtFields int
}

// errFrame is the class of errors of a malformed frame: the connection
// cannot be trusted to be in step any more and is closed.
var errFrame = errors.New("malformed frame")

func frameErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errFrame, fmt.Sprintf(format, a...))
}

// eagerFrame is the largest frame whose buffer is made whole before its
// bytes arrive; a larger one's grows as they do.
const eagerFrame = 64 << 10

// readFrame reads one frame from r. It refuses a length over
// lim.MaxFrame before reading further, so a connection holds at most one
// frame of MaxFrame; and it allocates for a large frame as its bytes
// arrive, not as its length field says, so a client that declares frames
// of MaxFrame and sends a few bytes of each (until the read timeout) makes
// the broker hold what it sent, not MaxFrame per connection. A short
// read is io.ErrUnexpectedEOF (io.EOF before the first byte).
func readFrame(r io.Reader, lim Limits) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 4 || n > lim.MaxFrame {
		return nil, frameErr("length %d is not in [4, %d]", n, lim.MaxFrame)
	}
	buf := make([]byte, 0, min(n, eagerFrame))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), n))
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// decodeFrame decodes a frame's content (after its length field).
func decodeFrame(buf []byte, lim Limits) (*Command, error) {
	if len(buf) < 4 {
		return nil, frameErr("%d bytes; a frame has at least 4", len(buf))
	}
	word := binary.BigEndian.Uint32(buf)
	typ, hlen := byte(word>>24), int(word&0xFFFFFF)
	if hlen > len(buf)-4 {
		return nil, frameErr("header length %d is more than the %d bytes in the frame", hlen, len(buf)-4)
	}
	if hlen > lim.MaxHeader {
		return nil, frameErr("header length %d is over the limit of %d", hlen, lim.MaxHeader)
	}
	h := buf[4 : 4+hlen]
	var c *Command
	var err error
	switch typ {
	case serializeJSON:
		c, err = decodeJSONHeader(h)
	case serializeRocketMQ:
		c, err = decodeBinaryHeader(h, lim)
	default:
		return nil, frameErr("serialize type %d is neither JSON (0) nor ROCKETMQ (1)", typ)
	}
	if err != nil {
		return nil, err
	}
	if len(c.ExtFields) > lim.MaxExtFields {
		return nil, frameErr("%d extFields; the limit is %d", len(c.ExtFields), lim.MaxExtFields)
	}
	c.Serialize = typ
	if rest := buf[4+hlen:]; len(rest) > 0 {
		c.Body = rest
	}
	return c, nil
}

func decodeJSONHeader(h []byte) (*Command, error) {
	// A JSON code is a Java int in RocketMQ's clients: one past the
	// binary header's int16 is only a code not served, answered so.
	c, ok := decodeJSONFast(h)
	if !ok {
		c = &Command{}
		if err := json.Unmarshal(h, c); err != nil {
			return nil, frameErr("header is not a JSON command: %v", err)
		}
	}
	return c, nil
}

// binReader reads the ROCKETMQ header; every read checks what is left.
type binReader struct {
	b   []byte
	err error
}

func (r *binReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = frameErr("binary header: %d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *binReader) u16() int {
	if b := r.take(2); b != nil {
		return int(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *binReader) i32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

// languages are RocketMQ's LanguageCode values by their byte.
var languages = []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}

func decodeBinaryHeader(h []byte, lim Limits) (*Command, error) {
	r := &binReader{b: h}
	c := &Command{Code: int32(int16(r.u16()))}
	if lang := r.take(1); lang != nil {
		c.Language = "OTHER"
		if int(lang[0]) < len(languages) {
			c.Language = languages[lang[0]]
		}
	}
	c.Version = int32(int16(r.u16()))
	c.Opaque = r.i32()
	c.Flag = r.i32()
	c.Remark = string(r.take(int(r.i32())))
	ext := &binReader{b: r.take(int(r.i32()))}
	if r.err != nil {
		return nil, r.err
	}
	for len(ext.b) > 0 && ext.err == nil {
		if c.ExtFields == nil {
			c.ExtFields = map[string]string{}
		}
		if len(c.ExtFields) >= lim.MaxExtFields {
			return nil, frameErr("more than %d extFields", lim.MaxExtFields)
		}
		k := ext.take(ext.u16())
		v := ext.take(int(ext.i32()))
		if ext.err == nil {
			c.ExtFields[string(k)] = string(v)
		}
	}
	if ext.err != nil {
		return nil, ext.err
	}
	return c, nil
}

// encode renders c as a whole frame, length field first, in c.Serialize.
// The header is appended in place after the two length fields, which are
// filled in last: one allocation for the frame unless escapes make the
// header longer than headerEstimate.
func (c *Command) encode() ([]byte, error) {
	out := make([]byte, 8, 8+c.headerEstimate()+len(c.Body))
	if c.Serialize == serializeRocketMQ {
		out = c.appendBinaryHeader(out)
	} else {
		out = appendJSONHeader(out, c)
	}
	h := len(out) - 8
	if h > 0xFFFFFF {
		return nil, fmt.Errorf("header of %d bytes does not fit a frame", h)
	}
	binary.BigEndian.PutUint32(out, uint32(4+h+len(c.Body)))
	binary.BigEndian.PutUint32(out[4:], uint32(c.Serialize)<<24|uint32(h))
	return append(out, c.Body...), nil
}

// headerEstimate is the length of c's header without escapes: its fixed
// members, the remark, and each extField with its quotes and separators.
func (c *Command) headerEstimate() int {
	n := 128 + len(c.Language) + len(c.Remark)
	for k, v := range c.ExtFields {
		n += len(k) + len(v) + 8
	}
	return n
}

// appendBinaryHeader appends c's header in the RocketMQ binary encoding
// to b.
func (c *Command) appendBinaryHeader(b []byte) []byte {
	keys := make([]string, 0, len(c.ExtFields))
	for k := range c.ExtFields {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a stable encoding, for tests and captures
	b = binary.BigEndian.AppendUint16(b, uint16(c.Code))
	b = append(b, 0) // JAVA: what a RocketMQ broker says it is
	b = binary.BigEndian.AppendUint16(b, uint16(c.Version))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Opaque))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Flag))
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Remark)))
	b = append(b, c.Remark...)
	at := len(b) // the extFields' length, filled in once they are written
	b = append(b, 0, 0, 0, 0)
	for _, k := range keys {
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.ExtFields[k])))
		b = append(b, c.ExtFields[k]...)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// isResponse and isOneway read the flag bits.
func (c *Command) isResponse() bool { return c.Flag&flagResponse != 0 }
func (c *Command) isOneway() bool   { return c.Flag&flagOneway != 0 }
