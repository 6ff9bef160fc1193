package remoting

import (
	"encoding/binary"
	"maps"
	"testing"
)

// batchMessage encodes one message of a SEND_BATCH_MESSAGE body.
func batchMessage(body []byte, props string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(22+len(body)+len(props)))
	b = binary.BigEndian.AppendUint32(b, 0xAABBCCDD)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
	return append(b, props...)
}

// FuzzDecodeBatch: a batch body, however malformed, decodes without a
// panic into messages that account for every byte of it, or is refused;
// never more than the item limit.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(batchMessage([]byte("hello"), "KEYS\x01k\x02"))
	f.Add(append(batchMessage([]byte("a"), ""), batchMessage(nil, "TAGS\x01t\x02")...))
	f.Add([]byte{0, 0, 0, 99, 1})
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := decodeBatch(b, 8)
		if err != nil {
			return
		}
		if len(items) > 8 {
			t.Fatalf("%d items past a limit of 8", len(items))
		}
		n := 0
		for _, it := range items {
			n += 22 + len(it.body) + len(it.props)
		}
		if n != len(b) {
			t.Fatalf("items account for %d of %d bytes", n, len(b))
		}
	})
}

// FuzzParseProperties: a properties string either parses into names and
// values that format and parse back to the same, or is refused; and
// propertiesLen is the formatted length.
func FuzzParseProperties(f *testing.F) {
	f.Add("KEYS\x01k1 k2\x02TAGS\x01t\x02")
	f.Add("no-separator")
	f.Add("\x01v\x02")
	f.Add("a\x01b\x01c\x02\x02")
	f.Fuzz(func(t *testing.T, s string) {
		props, err := parseProperties(s)
		if err != nil {
			return
		}
		f := formatProperties(props)
		again, err := parseProperties(f)
		if err != nil || !maps.Equal(props, again) {
			t.Fatalf("%q parsed to %q, which formats and parses to %q (%v)", s, props, again, err)
		}
		if n := propertiesLen(props); n != len(f) {
			t.Fatalf("propertiesLen is %d, the formatted properties take %d bytes", n, len(f))
		}
	})
}
