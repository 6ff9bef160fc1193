package remoting

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
)

// The headers as the clients send them: the Java client's (its field
// order, serializeTypeCurrentRPC) and the Go client's (remark "", its own
// field order, a SEND_MESSAGE_V2's one-letter fields).
var clientHeaders = []string{
	`{"code":310,"extFields":{"a":"pg","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000","h":"0","i":"DELAY\u00013\u0002","j":"0","k":"false","m":"false","n":"broker-a"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":397}`,
	`{"code":310,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"a":"pg","b":"T","i":"KEYS\u0001k1\u0002"}}`,
	`{"code":34,"language":"JAVA","version":397,"opaque":1,"flag":0,"extFields":{}}`,
	` { "code" : -1 , "flag" : 2 , "x" : true , "y" : false , "z" : -12 } `,
	`{"code":10,"remark":"caf\u00e9 ü","extFields":{"ключ":"значение"}}`,
}

// TestJSONFastClientHeaders: the headers the clients send take the fast
// path, and it decodes them as encoding/json does.
func TestJSONFastClientHeaders(t *testing.T) {
	fast := 0
	for _, h := range clientHeaders {
		want := &Command{}
		if err := json.Unmarshal([]byte(h), want); err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		got, ok := decodeJSONFast([]byte(h))
		if !ok {
			continue
		}
		fast++
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nfast %+v\njson %+v", h, got, want)
		}
	}
	if fast != len(clientHeaders) {
		t.Fatalf("%d of the %d headers took the fast path", fast, len(clientHeaders))
	}
	escaped := []byte(`{"code":310,"extFields":{"i":"DELAY` + "\x01" + `3"}}`)
	if _, ok := decodeJSONFast(escaped); ok {
		t.Fatal("a raw control byte in a string took the fast path; encoding/json refuses it")
	}
	if _, ok := decodeJSONFast([]byte(`{"remark":"\ud83d\ude00"}`)); ok {
		t.Fatal("a surrogate pair took the fast path")
	}
	if _, ok := decodeJSONFast([]byte(`{"Code":1}`)); ok {
		t.Fatal("a field name in another case took the fast path (encoding/json matches it)")
	}
}

// FuzzJSONHeaderFast: whenever the fast path decodes a header, encoding/json
// decodes it too, to the same command.
func FuzzJSONHeaderFast(f *testing.F) {
	for _, h := range clientHeaders {
		f.Add([]byte(h))
	}
	f.Add([]byte(`{"code":1,"code":2,"extFields":{"a":"1"},"extFields":{"b":"2"}}`))
	f.Add([]byte(`{"code":01}`))
	f.Add([]byte(`{"code":1.5}`))
	f.Add([]byte(`{"code":2147483648}`))
	f.Fuzz(func(t *testing.T, h []byte) {
		got, ok := decodeJSONFast(h)
		if !ok {
			return
		}
		want := &Command{}
		if err := json.Unmarshal(h, want); err != nil {
			t.Fatalf("%q: the fast path decoded what encoding/json refuses: %v", h, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nfast %+v\njson %+v", h, got, want)
		}
	})
}

// encodeCases are responses as the broker writes them, and the strings
// encoding/json escapes in its own way: HTML characters, U+2028 and
// U+2029, control bytes, invalid UTF-8, keys that sort by byte.
var encodeCases = []*Command{
	{},
	{Code: 0, Language: "JAVA", Version: brokerVersion, Opaque: 7, Flag: 1,
		ExtFields: map[string]string{"msgId": "7F000001", "queueId": "0", "queueOffset": "-1", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}},
	{Code: -1, Opaque: -2147483648, Flag: 3, Remark: `topic "a<b>&c" ` + "\u2028\u2029\x00\x1f\x7f\xff" + ` é`, ExtFields: map[string]string{}},
	{Code: 2147483647, Language: "GO", Remark: "\\\n\r\t\b\f", ExtFields: map[string]string{"b": "", "a": "\x01", "B": "<", "é": "\xed\xa0\x80", "": "empty"}},
}

// wireHeader is the header as a RocketMQ broker writes it (fastjson: the
// members in name order, nulls left out), for encoding/json to render as
// the reference of appendJSONHeader.
type wireHeader struct {
	Code      int32             `json:"code"`
	ExtFields map[string]string `json:"extFields,omitempty"`
	Flag      int32             `json:"flag"`
	Language  string            `json:"language"`
	Opaque    int32             `json:"opaque"`
	Remark    string            `json:"remark,omitempty"`
	Serialize string            `json:"serializeTypeCurrentRPC"`
	Version   int32             `json:"version"`
}

func wireJSON(c *Command) ([]byte, error) {
	return json.Marshal(wireHeader{Code: c.Code, ExtFields: c.ExtFields, Flag: c.Flag, Language: c.Language,
		Opaque: c.Opaque, Remark: c.Remark, Serialize: "JSON", Version: c.Version})
}

// TestJSONHeaderEncode: the header the broker writes is, byte for byte,
// encoding/json's rendering of the members in a RocketMQ broker's order,
// and a frame carrying it decodes back to the command.
func TestJSONHeaderEncode(t *testing.T) {
	many := &Command{Code: 1, ExtFields: map[string]string{}}
	for i := range 40 { // more keys than appendJSONHeader's inline array
		many.ExtFields[string(rune('a'+i%26))+strconv.Itoa(i)] = strconv.Itoa(i * i)
	}
	for _, c := range append(encodeCases, many) {
		want, err := wireJSON(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONHeader(nil, c); string(got) != string(want) {
			t.Fatalf("header of %+v:\ngot  %s\nwant %s", c, got, want)
		}
		c.Body = []byte("body")
		frame, err := c.encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeFrame(frame[4:], Limits{MaxFrame: 1 << 20, MaxHeader: 1 << 16, MaxExtFields: 64})
		if err != nil {
			t.Fatal(err)
		}
		ref := &Command{} // what the header says, as encoding/json reads it
		if err := json.Unmarshal(want, ref); err != nil {
			t.Fatal(err)
		}
		if back.Body = nil; !reflect.DeepEqual(back, ref) {
			t.Fatalf("frame of %+v decodes to %+v", ref, back)
		}
	}
}

// FuzzJSONHeaderEncode: for any strings, the header is wireJSON's.
func FuzzJSONHeaderEncode(f *testing.F) {
	f.Add(int32(0), "", "", "", "")
	f.Add(int32(310), "JAVA", "remark <&>", "key\u2028", "\xff\x00value")
	f.Fuzz(func(t *testing.T, code int32, lang, remark, k, v string) {
		c := &Command{Code: code, Language: lang, Opaque: code ^ 0x5a5a, Flag: 1, Remark: remark,
			ExtFields: map[string]string{k: v, v: remark}}
		want, err := wireJSON(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONHeader([]byte("prefix"), c); string(got) != "prefix"+string(want) {
			t.Fatalf("got  %s\nwant %s", got[6:], want)
		}
	})
}
