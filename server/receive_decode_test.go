package server

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// receiveBodies are receive requests of the shape consumers send (the
// fast reader must take them) and near misses it must leave to the
// general decoder.
var receiveBodies = []struct {
	body string
	fast bool
}{
	{`{"max":1000,"invisible":"30s","wait":"20s","ack":["AAIAAAAAAAAAAAAAAAE","AAIAAAAAAAAAAAAAAAF"],"body_encoding":"text"}`, true},
	{` {  "ack" : [ ] , "max" : 0 }` + "\n\t", true},
	{`{}`, true},
	{`{"wait":"","ack":[""]}`, true},
	{``, false},
	{`null`, false},
	{`{"max":1,"max":2}`, false},
	{`{"MAX":1}`, false},
	{`{"max":-1}`, false},
	{`{"max":1.0}`, false},
	{`{"max":1e3}`, false},
	{`{"max":01}`, false},
	{`{"max":1234567890}`, false},
	{`{"max":"1"}`, false},
	{`{"ack":null}`, false},
	{`{"ack":["a\u0041"]}`, false},
	{`{"ack":["é"]}`, false},
	{`{"wait":"1s"} {}`, false},
	{`{"wait":"1s",}`, false},
	{`{"ack":["a",]}`, false},
	{`{"unknown":1}`, false},
	{`{"wait":"1s"`, false},
	{`[]`, false},
}

// TestReadReceiveFastMatchesDecode: what the fast reader takes, the
// general decoder takes too, with the same result; and it takes the
// shapes consumers send.
func TestReadReceiveFastMatchesDecode(t *testing.T) {
	for _, c := range receiveBodies {
		var in api.ReceiveRequest
		if got := readReceiveFast([]byte(c.body), &in); got != c.fast {
			t.Errorf("%s: fast reader took it: %v, want %v", c.body, got, c.fast)
			continue
		}
		checkFastAgrees(t, []byte(c.body))
	}
}

// checkFastAgrees fails t if the fast reader takes body but the general
// decoder refuses it or reads something else.
func checkFastAgrees(t *testing.T, body []byte) {
	t.Helper()
	var fast, slow api.ReceiveRequest
	if !readReceiveFast(body, &fast) {
		if !reflect.DeepEqual(fast, api.ReceiveRequest{}) {
			t.Errorf("%q: refused, but changed the request to %+v", body, fast)
		}
		return
	}
	if err := decodeBody(body, &slow, true); err != nil || !reflect.DeepEqual(fast, slow) {
		t.Errorf("%q:\n fast %+v\n general %+v %v", body, fast, slow, err)
	}
}

func FuzzReadReceiveFast(f *testing.F) {
	for _, c := range receiveBodies {
		f.Add([]byte(c.body))
	}
	f.Add([]byte(`{"ack":[` + strings.Repeat(`"AAIAAAAAAAAAAAAAAAE",`, 20) + `"x"]}`))
	f.Fuzz(func(t *testing.T, body []byte) { checkFastAgrees(t, body) })
}
