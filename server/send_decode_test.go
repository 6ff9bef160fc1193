package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
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
	// Dues repeated, alternating and new: the answer reuses the text of
	// the last due_time only for the same due.
	rcs := []engine.Receipt{
		{ID: message.ID{Pos: 1, Tag: 0xfedcba9876543210}, Topic: "orders", Queue: 3, Due: 1700000000123},
		{ID: message.ID{Pos: 1 << 63, Tag: 7}, Topic: "orders", Queue: 3, Due: 1700000000123},
		{ID: message.ID{}, Topic: `a<b>&"c\` + "\u2028\x01é", Queue: 0, Due: -5, Duplicate: true},
		{ID: message.ID{Pos: 2, Tag: 2}, Topic: "orders", Queue: 1, Due: 1700000000123},
		{ID: message.ID{Pos: 3, Tag: 3}, Topic: "orders", Queue: 1, Due: 1700000000124},
		{ID: message.ID{Pos: 4, Tag: 4}, Topic: "orders", Queue: 1, Due: 253402300800000}, // year 10000
	}
	refs := make([]api.Receipt, len(rcs))
	for i, rc := range rcs {
		refs[i] = receiptOf(rc)
	}
	for _, batch := range []bool{false, true} {
		got := httptest.NewRecorder()
		want := httptest.NewRecorder()
		if batch {
			writeReceipts(got, rcs, true)
			writeJSON(want, 200, api.BatchReceipts{Receipts: refs})
		} else {
			writeReceipts(got, rcs[2:3], false)
			writeJSON(want, 200, refs[2])
		}
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Code != want.Code ||
			got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("batch %v:\n got  %d %q %s\n want %d %q %s", batch, got.Code, got.Header().Get("Content-Type"), got.Body,
				want.Code, want.Header().Get("Content-Type"), want.Body)
		}
		var back api.BatchReceipts
		if batch && (json.Unmarshal(got.Body.Bytes(), &back) != nil || !reflect.DeepEqual(back.Receipts, refs)) {
			t.Errorf("the batch answer does not read back: %s", got.Body)
		}
	}
	if strings.Contains(jsonContentType[0], " ") {
		t.Fatal("the shared Content-Type was changed")
	}
}

// TestBatchBufferReuse: a batch read into a pooled buffer starts from
// zero messages whatever the buffer held: a body the fast reader refuses
// halfway leaves what it read cleared, and clearBatch clears the rest.
func TestBatchBufferReuse(t *testing.T) {
	p := takeBatch()
	in := api.BatchRequest{Messages: *p}
	if readBatchFast([]byte(`{"messages":[{"key":"a","body":"x"},{"key":"b","tag":"\u0041"}]}`), &in) {
		t.Fatal("the fast reader took an escaped string")
	}
	if len(in.Messages) != 0 {
		t.Fatalf("a refused body left %d messages", len(in.Messages))
	}
	for i, m := range in.Messages[:2] {
		if !reflect.DeepEqual(m, api.SendMessage{}) {
			t.Fatalf("a refused body left message %d in the buffer: %+v", i, m)
		}
	}
	if !readBatchFast([]byte(`{"messages":[{"body":"y"}]}`), &in) || len(in.Messages) != 1 ||
		in.Messages[0].Key != "" || in.Messages[0].Body == nil || *in.Messages[0].Body != "y" {
		t.Fatalf("a batch read after a refused one: %+v", in.Messages)
	}
	back := clearBatch(in.Messages)
	if len(back) != 0 || cap(back) != cap(in.Messages) {
		t.Fatalf("clearBatch gave %d messages of %d, want 0 of %d", len(back), cap(back), cap(in.Messages))
	}
	for i, m := range back[:cap(back)] {
		if !reflect.DeepEqual(m, api.SendMessage{}) {
			t.Fatalf("clearBatch left message %d: %+v", i, m)
		}
	}
	if clearBatch(make([]api.SendMessage, 1, maxPooledBatch+1)) != nil {
		t.Fatal("clearBatch kept a buffer over maxPooledBatch")
	}
}

// TestBatchRefusedPastTheBuffer: a refused batch longer than the pooled
// buffer leaves nothing in it either (the scan had moved to a larger
// array; the buffer still held the first messages).
func TestBatchRefusedPastTheBuffer(t *testing.T) {
	p := takeBatch()
	in := api.BatchRequest{Messages: *p}
	var sb strings.Builder
	sb.WriteString(`{"messages":[`)
	for i := 0; i <= cap(in.Messages); i++ {
		fmt.Fprintf(&sb, `{"key":"k%d","tag":"secret"},`, i)
	}
	sb.WriteString(`{"tag":"\u0041"}]}`)
	if readBatchFast([]byte(sb.String()), &in) {
		t.Fatal("the fast reader took an escaped string")
	}
	for i, m := range in.Messages[:cap(in.Messages)] {
		if !reflect.DeepEqual(m, api.SendMessage{}) {
			t.Fatalf("a refused body left message %d in the buffer: %+v", i, m)
		}
	}
}
