package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// sendBodies are messages of the shape producers send (the fast reader
// must take them) and near misses it must leave to the general decoder.
var sendBodies = []struct {
	body string
	fast bool
}{
	{`{"body":"hello","delay":"1h0m0s"}`, true},
	{`{"key":"order-1","tag":"t","group":"g","body_base64":"aGk=","dedup_id":"d","ttl":"1m","deadline":1700000000000,"window":250,"at":1700000000000,"level":3}`, true},
	{` { "body" : "" , "level" : 0 }` + "\n", true},
	{`{}`, true},
	{`{"body":"a","body_base64":"YQ=="}`, true}, // refused later, by sendRequest, as before
	{``, false},
	{`null`, false},
	{`{"body":null}`, false},
	{`{"body":"a","body":"b"}`, false},
	{`{"Body":"a"}`, false},
	{`{"body":"a\u0041"}`, false},
	{`{"body":"é"}`, false},
	{`{"body":"tab	in"}`, false},
	{`{"properties":{"k":"v"}}`, false},
	{`{"at":-1}`, false},
	{`{"at":1.5}`, false},
	{`{"at":1e3}`, false},
	{`{"at":01}`, false},
	{`{"at":1234567890123456789}`, false},
	{`{"window":1234567890}`, false},
	{`{"level":"1"}`, false},
	{`{"body":"a"} {}`, false},
	{`{"body":"a",}`, false},
	{`{"unknown":1}`, false},
	{`{"body":"a"`, false},
	{`[]`, false},
}

// TestReadSendFastMatchesDecode: what the fast reader takes, the general
// decoder takes too, with the same result, alone and as a batch; and it
// takes the shapes producers send.
func TestReadSendFastMatchesDecode(t *testing.T) {
	for _, c := range sendBodies {
		var in api.SendMessage
		if got := readSendFast([]byte(c.body), &in); got != c.fast {
			t.Errorf("%s: fast reader took it: %v, want %v", c.body, got, c.fast)
			continue
		}
		checkSendFastAgrees(t, []byte(c.body))
		batch := `{"messages":[` + c.body + `,` + c.body + `]}`
		var bin api.BatchRequest
		if got := readBatchFast([]byte(batch), &bin); got != c.fast {
			t.Errorf("%s: fast batch reader took it: %v, want %v", batch, got, c.fast)
		}
		checkBatchFastAgrees(t, []byte(batch))
	}
	for _, b := range []string{`{"messages":[]}`, ` {"messages" : [ {"body":"x"} ] } `} {
		var in api.BatchRequest
		if !readBatchFast([]byte(b), &in) {
			t.Errorf("%s: fast batch reader refused it", b)
		}
		checkBatchFastAgrees(t, []byte(b))
	}
	for _, b := range []string{`{"messages":null}`, `{}`, `{"messages":[],"messages":[]}`, `{"messages":[{}],"x":1}`, `{"messages":[{},]}`} {
		var in api.BatchRequest
		if readBatchFast([]byte(b), &in) {
			t.Errorf("%s: fast batch reader took it", b)
		}
	}
}

// checkSendFastAgrees fails t if the fast reader takes body but the
// general decoder refuses it or reads something else.
func checkSendFastAgrees(t *testing.T, body []byte) {
	t.Helper()
	var fast, slow api.SendMessage
	if !readSendFast(body, &fast) {
		if !reflect.DeepEqual(fast, api.SendMessage{}) {
			t.Errorf("%q: refused, but changed the message to %+v", body, fast)
		}
		return
	}
	if err := decodeBody(body, &slow, false); err != nil || !reflect.DeepEqual(fast, slow) {
		t.Errorf("%q:\n fast %+v\n general %+v %v", body, fast, slow, err)
	}
}

func checkBatchFastAgrees(t *testing.T, body []byte) {
	t.Helper()
	var fast, slow api.BatchRequest
	if !readBatchFast(body, &fast) {
		if !reflect.DeepEqual(fast, api.BatchRequest{}) {
			t.Errorf("%q: refused, but changed the batch to %+v", body, fast)
		}
		return
	}
	if err := decodeBody(body, &slow, false); err != nil || !reflect.DeepEqual(fast, slow) {
		t.Errorf("%q:\n fast %+v\n general %+v %v", body, fast, slow, err)
	}
}

func FuzzReadSendFast(f *testing.F) {
	for _, c := range sendBodies {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSendFastAgrees(t, body)
		checkBatchFastAgrees(t, body)
		checkBatchFastAgrees(t, append(append([]byte(`{"messages":[`), body...), ']', '}'))
	})
}

// TestWriteReceiptsMatchesJSON: the hand-written answer of a send is
// byte for byte what writeJSON (encoding/json) made of it, for strings
// that need escaping too.
func TestWriteReceiptsMatchesJSON(t *testing.T) {
	rcs := []api.Receipt{
		{ID: "0001HX3K2Z5V9Q7M", Topic: "orders", Queue: 3, Due: 1700000000123, DueTime: "2023-11-14T22:13:20.123Z"},
		{ID: "x", Topic: `a<b>&"c\` + "\u2028\x01é", Queue: 0, Due: -5, DueTime: "", Duplicate: true},
	}
	for _, batch := range []bool{false, true} {
		got := httptest.NewRecorder()
		want := httptest.NewRecorder()
		if batch {
			writeReceipts(got, rcs, true)
			writeJSON(want, 200, api.BatchReceipts{Receipts: rcs})
		} else {
			writeReceipts(got, rcs[1:], false)
			writeJSON(want, 200, rcs[1])
		}
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Code != want.Code ||
			got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("batch %v:\n got  %d %q %s\n want %d %q %s", batch, got.Code, got.Header().Get("Content-Type"), got.Body,
				want.Code, want.Header().Get("Content-Type"), want.Body)
		}
		var back api.BatchReceipts
		if batch && (json.Unmarshal(got.Body.Bytes(), &back) != nil || !reflect.DeepEqual(back.Receipts, rcs)) {
			t.Errorf("the batch answer does not read back: %s", got.Body)
		}
	}
	if strings.Contains(jsonContentType[0], " ") {
		t.Fatal("the shared Content-Type was changed")
	}
}
