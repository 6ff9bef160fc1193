package remoting

import (
	"encoding/json"
	"reflect"
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
