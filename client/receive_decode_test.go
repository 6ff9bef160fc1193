package client

import (
	"encoding/json"
	"reflect"
	"testing"
)

// receiveAnswers are answers of every shape the fast reader must read as
// encoding/json does: what the broker writes (first), and valid JSON it
// does not write, which the fast reader must hand over to encoding/json.
var receiveAnswers = []struct {
	body string
	fast bool // the fast reader takes it without falling back
}{
	{`{"messages":[{"id":"0123","receipt":"r","attempt":1,"queue":2,"offset":18446744073709551615,"key":"k","tag":"t","group":"g",` +
		`"properties":{"a":"b","c":"\u003c\u2028"},"body":"h\"i\\\n","body_base64":"aCJpXAo=","due":1764500000123,"visible":1764500000124}],"acked":3}` + "\n", true},
	{`{"messages":[{"id":"1","receipt":"r","attempt":1,"queue":0,"offset":0,"key":"","tag":"","group":"","body":"text only","due":1,"visible":2},` +
		`{"id":"2","receipt":"s","attempt":1,"queue":0,"offset":1,"key":"","tag":"","group":"","body_base64":"/wA=","due":1,"visible":2},` +
		`{"id":"3","receipt":"u","attempt":1,"queue":0,"offset":2,"key":"","tag":"","group":"","body":"","body_base64":"","due":1,"visible":2}],"acked":0}`, true},
	{` { "messages" : [ ] , "acked" : 0 } `, true},
	{`{"messages":[],"acked":0,"later_field":1}`, false},
	{`{"messages":[{"id":"1","body":null,"properties":null,"due":1.5e3}]}`, false},
	{`{"messages":[{"ID":"1","Receipt":"r"}]}`, false},
	{`{"messages":[{"id":"1","properties":{"k\u00e9":"v"}}]}`, false},
	{`{"messages":[{"id":"1","due":-5}]}`, false},
	{`{"messages":[{"id":"1","body_base64":"aGk\/"}]}`, false},
	{`{"messages":[{"id":"1","offset":012}]}`, false},
	{`{"messages":[{"id":"1","body":"x"}],"acked":1}junk`, false},
	{`null`, false},
}

// TestReceiveDecodeMatchesJSON: the fast reader and encoding/json agree on
// every answer, results and errors alike.
func TestReceiveDecodeMatchesJSON(t *testing.T) {
	for _, c := range receiveAnswers {
		var fast, slow receiveAnswer
		errFast := fast.decodeRaw([]byte(c.body))
		errSlow := json.Unmarshal([]byte(c.body), &slow)
		if (errFast == nil) != (errSlow == nil) || !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s:\n fast %+v %v\n json %+v %v", c.body, fast, errFast, slow, errSlow)
		}
		s := scan{b: []byte(c.body)}
		var a receiveAnswer
		took := s.receiveAnswer(&a)
		s.ws()
		if took = took && s.i == len(s.b); took != c.fast {
			t.Errorf("%s: fast reader took it: %v, want %v", c.body, took, c.fast)
		}
	}
}

// FuzzReceiveDecode: on any input, the fast reader with its fallback
// gives what encoding/json gives.
func FuzzReceiveDecode(f *testing.F) {
	for _, c := range receiveAnswers {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, slow receiveAnswer
		errFast := fast.decodeRaw(body)
		errSlow := json.Unmarshal(body, &slow)
		if (errFast == nil) != (errSlow == nil) || errSlow == nil && !reflect.DeepEqual(fast, slow) {
			t.Errorf("%q:\n fast %+v %v\n json %+v %v", body, fast, errFast, slow, errSlow)
		}
	})
}
