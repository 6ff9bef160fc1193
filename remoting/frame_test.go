package remoting

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

var testLimits = Limits{MaxFrame: 1 << 20, MaxHeader: 64 << 10, MaxExtFields: 64}

func roundTrip(t *testing.T, c *Command) *Command {
	t.Helper()
	b, err := c.encode()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := readFrame(bytes.NewReader(b), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeFrame(buf, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestFrameRoundTrip: both header encodings carry every field and the body.
func TestFrameRoundTrip(t *testing.T) {
	for _, typ := range []byte{serializeJSON, serializeRocketMQ} {
		in := &Command{Code: 310, Language: "JAVA", Version: 985, Opaque: -7, Flag: flagOneway, Remark: "r\u00e9mark",
			ExtFields: map[string]string{"a": "group", "b": "topic", "empty": ""}, Serialize: typ, Body: []byte("body\x00\x01")}
		got := roundTrip(t, in)
		if got.Code != in.Code || got.Opaque != in.Opaque || got.Flag != in.Flag || got.Remark != in.Remark ||
			got.Version != in.Version || got.Language != "JAVA" || got.Serialize != typ || !bytes.Equal(got.Body, in.Body) {
			t.Fatalf("type %d: got %+v, want %+v", typ, got, in)
		}
		for k, v := range in.ExtFields {
			if got.ExtFields[k] != v {
				t.Fatalf("type %d: extField %q is %q, want %q", typ, k, got.ExtFields[k], v)
			}
		}
	}
}

// TestFrameRefusals: each malformed frame is an errFrame (the connection
// is closed with a log line), never a panic or an allocation of what the
// length claims.
func TestFrameRefusals(t *testing.T) {
	frame := func(typ byte, header, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
		b = binary.BigEndian.AppendUint32(b, uint32(typ)<<24|uint32(len(header)))
		return append(append(b, header...), body...)
	}
	manyFields := &Command{Code: 10, ExtFields: map[string]string{}}
	for i := 0; i < 65; i++ {
		manyFields.ExtFields[strings.Repeat("k", i+1)] = "v"
	}
	manyBin := manyFields.appendBinaryHeader(nil)
	cases := map[string][]byte{
		"length over the limit":  binary.BigEndian.AppendUint32(nil, 1<<30),
		"negative length":        binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF),
		"length under 4":         binary.BigEndian.AppendUint32(nil, 3),
		"header not JSON":        frame(0, []byte("{not json"), nil),
		"header length too big":  append(binary.BigEndian.AppendUint32(nil, 8), 0, 0, 0, 200, 1, 2, 3, 4),
		"unknown serialize type": frame(7, []byte("{}"), nil),
		"too many extFields":     frame(1, manyBin, nil),
		"binary header short":    frame(1, []byte{0, 10, 0}, nil),
		"binary remark too long": frame(1, append([]byte{0, 10, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0}, 0x7F, 0, 0, 0), nil),
		"extFields not strings":  frame(0, []byte(`{"code":10,"extFields":{"a":1}}`), nil),
	}
	for name, b := range cases {
		buf, err := readFrame(bytes.NewReader(b), testLimits)
		if err == nil {
			_, err = decodeFrame(buf, testLimits)
		}
		if !errors.Is(err, errFrame) {
			t.Errorf("%s: got %v, want a malformed-frame error", name, err)
		}
	}
	// A body shorter than the length says: the read fails, no frame.
	short := frame(0, []byte(`{"code":10}`), []byte("0123456789"))
	if _, err := readFrame(bytes.NewReader(short[:len(short)-3]), testLimits); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short body: got %v, want io.ErrUnexpectedEOF", err)
	}
}

// FuzzDecodeFrame: no input makes the decoder panic, and what decodes
// encodes and decodes again to the same command.
func FuzzDecodeFrame(f *testing.F) {
	for _, typ := range []byte{serializeJSON, serializeRocketMQ} {
		b, _ := (&Command{Code: 11, Opaque: 3, ExtFields: map[string]string{"topic": "t", "queueId": "0"}, Serialize: typ, Body: []byte("x")}).encode()
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 4, 1, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 12, 0, 0, 0, 8, '{', '"', 'a', '}'})
	f.Fuzz(func(t *testing.T, in []byte) {
		buf, err := readFrame(bytes.NewReader(in), testLimits)
		if err != nil {
			return
		}
		c, err := decodeFrame(buf, testLimits)
		if err != nil {
			return
		}
		b, err := c.encode()
		if err != nil {
			return
		}
		buf2, err := readFrame(bytes.NewReader(b), testLimits)
		if err != nil {
			t.Fatalf("re-encoded frame does not read: %v", err)
		}
		c2, err := decodeFrame(buf2, testLimits)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if c2.Code != c.Code || c2.Opaque != c.Opaque || c2.Flag != c.Flag || !bytes.Equal(c2.Body, c.Body) || len(c2.ExtFields) != len(c.ExtFields) {
			t.Fatalf("round trip changed the command: %+v vs %+v", c, c2)
		}
	})
}

// TestBatchDecode: a batch body decodes into its messages, and a length
// that does not fit is an error, not a panic or a short message.
func TestBatchDecode(t *testing.T) {
	item := func(body, props string) []byte {
		size := 22 + len(body) + len(props)
		b := binary.BigEndian.AppendUint32(nil, uint32(size))
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint32(b, 5)
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
		return append(b, props...)
	}
	body := append(item("one", "UNIQ_KEY\x01a\x02"), item("two", "")...)
	got, err := decodeBatch(body, 10)
	if err != nil || len(got) != 2 || string(got[0].body) != "one" || got[0].flag != 5 || got[0].props != "UNIQ_KEY\x01a\x02" || string(got[1].body) != "two" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := decodeBatch(body[:len(body)-1], 10); err == nil {
		t.Fatal("a truncated batch decoded")
	}
	if _, err := decodeBatch(body, 1); err == nil {
		t.Fatal("a batch over the limit decoded")
	}
	bad := item("one", "")
	binary.BigEndian.PutUint32(bad[16:], 1000)
	if _, err := decodeBatch(bad, 10); err == nil {
		t.Fatal("a body length past the message decoded")
	}
}

// TestProperties: RocketMQ's properties string round-trips, and an item
// without a separator is refused rather than dropped.
func TestProperties(t *testing.T) {
	in := map[string]string{"KEYS": "k1 k2", "TAGS": "t", "user": ""}
	got, err := parseProperties(formatProperties(in))
	if err != nil || len(got) != 3 || got["KEYS"] != "k1 k2" || got["user"] != "" {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := parseProperties("KEYS\x01a\x02broken\x02"); err == nil {
		t.Fatal("an item without a separator was accepted")
	}
}
