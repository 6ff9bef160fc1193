package client

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// receiptAnswers are answers to a send as the broker writes them (the
// fast reader must take them) and others it must leave to encoding/json.
var receiptAnswers = []struct {
	body string
	fast bool
}{
	{`{"id":"0001HX3K2Z5V9Q7M","topic":"orders","queue":3,"due":1700000000123,"due_time":"2023-11-14T22:13:20.123Z"}` + "\n", true},
	{`{"id":"x","topic":"a\u003cb","queue":0,"due":0,"due_time":"","duplicate":true}`, true},
	{` { "duplicate" : false , "due" : 5 } `, true},
	{`{}`, true},
	{`{"id":"x","extra":1}`, false},
	{`{"ID":"x"}`, false},
	{`{"due":-1}`, false},
	{`{"due":1.5}`, false},
	{`{"queue":99999999999}`, false},
	{`{"duplicate":null}`, false},
	{`{"duplicate":tru}`, false},
	{`{"id":"x"} x`, false},
	{`{"id":"\xff"}`, false},
	{`null`, false},
	{``, false},
}

// TestReceiptDecodeMatchesJSON: the fast reader with its fallback gives
// what encoding/json gives, alone and in a batch, and takes the broker's
// own shapes.
func TestReceiptDecodeMatchesJSON(t *testing.T) {
	for _, c := range receiptAnswers {
		checkReceiptDecode(t, []byte(c.body))
		s := scan{b: []byte(c.body)}
		var r Receipt
		took := s.receipt(&r, nil)
		s.ws()
		if took = took && s.i == len(s.b); took != c.fast {
			t.Errorf("%s: fast reader took it: %v, want %v", c.body, took, c.fast)
		}
		checkReceiptDecode(t, []byte(`{"receipts":[`+c.body+`,`+c.body+`]}`))
	}
	checkReceiptDecode(t, []byte(`{"receipts":[]}`))
	// Topics and due times that repeat, change, come back and hold
	// escapes: each receipt keeps its own.
	var mixed []byte
	for i, c := range receiptAnswers[:4] {
		for _, j := range []int{i, 0, i} {
			if len(mixed) > 0 {
				mixed = append(mixed, ',')
			}
			mixed = append(mixed, receiptAnswers[j].body...)
		}
		_ = c
	}
	checkReceiptDecode(t, []byte(`{"receipts":[`+string(mixed)+`,{"topic":"a\u003cb","due_time":"a\"b"},{"topic":"a<b","due_time":"a\"b"},{"topic":"","due_time":""}]}`))
}

func checkReceiptDecode(t *testing.T, body []byte) {
	t.Helper()
	var fast, slow Receipt
	errFast := receiptAnswer{&fast}.decodeRaw(body)
	errSlow := json.Unmarshal(body, &slow)
	if (errFast == nil) != (errSlow == nil) || errSlow == nil && !reflect.DeepEqual(fast, slow) {
		t.Errorf("%q:\n fast %+v %v\n json %+v %v", body, fast, errFast, slow, errSlow)
	}
	var fastB, slowB api.BatchReceipts
	errFast = batchAnswer{&fastB, 2}.decodeRaw(body)
	errSlow = json.Unmarshal(body, &slowB)
	if (errFast == nil) != (errSlow == nil) || errSlow == nil && !reflect.DeepEqual(fastB, slowB) {
		t.Errorf("%q as a batch:\n fast %+v %v\n json %+v %v", body, fastB, errFast, slowB, errSlow)
	}
}

// FuzzReceiptDecode: on any input, the fast readers with their fallback
// give what encoding/json gives.
func FuzzReceiptDecode(f *testing.F) {
	for _, c := range receiptAnswers {
		f.Add([]byte(c.body))
	}
	f.Fuzz(checkReceiptDecode)
}
