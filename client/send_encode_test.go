package client

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// TestSendEncodingMatchesJSON: the hand-written encoding of a send and of
// a batch is byte for byte what encoding/json writes, for every member
// set and unset and for strings that need escaping.
func TestSendEncodingMatchesJSON(t *testing.T) {
	empty, text, b64 := "", "hello <b> & \"q\" \\ \n\t\x01 é \u2028 \xff", "aGk="
	msgs := []api.SendMessage{
		{},
		{Body: &empty},
		{Key: "k", Tag: "t", Group: "g", Properties: map[string]string{"z": "1", "a": "<&>", "m": ""}, Body: &text,
			DedupID: "d", Deadline: 1700000000000, TTL: "1m", Window: 250,
			Delivery: api.Delivery{Delay: "1h0m0s", At: 1700000000001, Level: 3}},
		{BodyBase64: &b64, Window: -5, Delivery: api.Delivery{At: -1, Level: -2}},
		{Properties: map[string]string{}},
	}
	for _, m := range msgs {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSendMessage(nil, &m); !bytes.Equal(got, want) {
			t.Errorf("message:\n got  %s\n want %s", got, want)
		}
	}
	for _, r := range []api.BatchRequest{{Messages: msgs}, {Messages: []api.SendMessage{}}, {}} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := (batchBody{&r}).appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("batch:\n got  %s\n want %s", got, want)
		}
	}
}
