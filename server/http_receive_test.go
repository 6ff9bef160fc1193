package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// referenceReceived is the receive answer's message built as encoding/json
// would write it from api.ReceivedMessage: what the hand encoder must match.
func referenceReceived(r engine.Received, enc api.BodyEncoding) api.ReceivedMessage {
	m := r.Message
	out := api.ReceivedMessage{ID: r.ID.String(), Receipt: r.Receipt, Attempt: r.Attempt, Queue: r.Queue, Offset: r.Offset,
		Key: m.Key, Tag: m.Tag, Group: m.Group, Properties: m.Properties, Due: api.Millis(r.Due), Visible: api.Millis(r.Visible.Visible)}
	text := enc != api.BodyBase64 && utf8.Valid(m.Body)
	if text {
		s := string(m.Body)
		out.Body = &s
	}
	if !text || enc != api.BodyText {
		out.BodyBase64 = base64.StdEncoding.EncodeToString(m.Body)
	}
	return out
}

func TestReceiveEncodingMatchesJSON(t *testing.T) {
	msg := func(key string, props map[string]string, body string) engine.Received {
		return engine.Received{
			Visible: engine.Visible{ID: message.ID{Pos: 0x0123456789abcdef, Tag: 0xfedcba9876543210}, Offset: 1 << 40,
				Due: 1764500000123, Visible: 1764500000456,
				Message: &message.Stored{Message: message.Message{Topic: "t", Key: key, Tag: "tag\t1", Group: "g<&>",
					Properties: props, Body: []byte(body)}}},
			Receipt: "AAECAwQFBgcICQoLDA0ODxAREhMU", Attempt: 3, Queue: 7,
		}
	}
	got := []engine.Received{
		msg("plain", nil, "hello"),
		msg("q\"u\\o\nte\x01\x1f", map[string]string{"z": "last", "a": "first \u2028 \u2029", "m": "é😀"}, "text with \"quotes\" and \u2029"),
		msg("", map[string]string{"bad": "\xff\xfe"}, "\xff\x00binary"),
		msg("\xc3", nil, "<html>&amp;</html>"),
	}
	for _, enc := range []api.BodyEncoding{"", api.BodyBoth, api.BodyText, api.BodyBase64} {
		want := api.ReceiveResponse{Messages: []api.ReceivedMessage{}, Acked: 5}
		for _, r := range got {
			want.Messages = append(want.Messages, referenceReceived(r, enc))
		}
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(want); err != nil {
			t.Fatal(err)
		}
		if b := appendReceiveResponse(nil, got, 5, enc); !bytes.Equal(b, buf.Bytes()) {
			t.Errorf("encoding %q:\n got %s\nwant %s", enc, b, buf.Bytes())
		}
	}
	if b := appendReceiveResponse(nil, nil, 0, ""); string(b) != "{\"messages\":[],\"acked\":0}\n" {
		t.Errorf("empty answer %s", b)
	}
	// An empty body keeps body_base64 "" where the encoding promises it
	// (omitempty would drop it), so that base64 always carries the body.
	empty := []engine.Received{msg("e", nil, "")}
	for enc, want := range map[api.BodyEncoding]string{
		api.BodyBoth:   `"body":"","body_base64":"","due"`,
		api.BodyText:   `"group":"g\u003c\u0026\u003e","body":"","due"`,
		api.BodyBase64: `"group":"g\u003c\u0026\u003e","body_base64":"","due"`,
	} {
		if b := appendReceiveResponse(nil, empty, 0, enc); !bytes.Contains(b, []byte(want)) {
			t.Errorf("empty body, encoding %s: %s lacks %s", enc, b, want)
		}
	}
}

func TestAppendIDIsTheTextForm(t *testing.T) {
	for _, id := range []message.ID{{}, {Pos: 1, Tag: 2}, {Pos: ^uint64(0), Tag: 0xa0b0c0d0e0f00010}} {
		if got := string(appendID(nil, id)); got != id.String() {
			t.Errorf("appendID %s, String %s", got, id.String())
		}
	}
}

// receiveAck is POST .../receive with acks; it returns the answer.
func (ts *testServer) receiveAck(topic, group string, body map[string]any) api.ReceiveResponse {
	ts.t.Helper()
	var out api.ReceiveResponse
	ts.call("POST", "/v1/topics/"+topic+"/groups/"+group+"/receive", body, http.StatusOK, &out)
	return out
}

func receiptsOf(ms []api.ReceivedMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Receipt)
	}
	return out
}

// TestReceiveCarriesAcks: a receive acks the receipts it carries before it
// leases, all or nothing; when one fails nothing is acked or leased.
func TestReceiveCarriesAcks(t *testing.T) {
	ts := newTestServer(t)
	for i := range 3 {
		ts.call("POST", "/v1/topics/jobs/messages", map[string]any{"body": strings.Repeat("x", i+1)}, http.StatusOK, nil)
	}
	// All three visible first: a receive returns with what is visible
	// when it asks, and the sends' fire records may be apart.
	ts.waitVisible("jobs", 3)
	first := ts.receiveAck("jobs", "g", map[string]any{"max": 2, "wait": "5s"})
	if len(first.Messages) != 2 || first.Acked != 0 {
		t.Fatalf("first receive: %+v", first)
	}
	// Ack both (one given twice) and lease the third in one request.
	acks := append(receiptsOf(first.Messages), first.Messages[0].Receipt)
	second := ts.receiveAck("jobs", "g", map[string]any{"ack": acks, "wait": "5s"})
	if second.Acked != 2 || len(second.Messages) != 1 {
		t.Fatalf("receive with acks: %+v", second)
	}
	gs, err := ts.eng.Groups("jobs")
	if err != nil || len(gs) != 1 || gs[0].Acked != 2 || gs[0].InFlight != 1 {
		t.Fatalf("group after the acks: %+v %v", gs, err)
	}

	// One stale receipt: nothing acked (the third stays leased), nothing
	// leased (the fourth stays visible), and the error names the receipt.
	ts.call("POST", "/v1/topics/jobs/messages", map[string]any{"body": "fourth"}, http.StatusOK, nil)
	stale := first.Messages[1].Receipt
	r := ts.do("POST", "/v1/topics/jobs/groups/g/receive", map[string]any{"ack": []string{second.Messages[0].Receipt, stale}, "wait": "5s"})
	ts.wantError(r, http.StatusNotFound, "not_found")
	if msg := r.errorMessage(); !strings.Contains(msg, stale) || !strings.Contains(msg, "nothing acked, nothing leased") {
		t.Fatalf("error message %q does not name the receipt and the outcome", msg)
	}
	fourth := ts.receiveAck("jobs", "g", map[string]any{"ack": receiptsOf(second.Messages), "wait": "5s"})
	if fourth.Acked != 1 || len(fourth.Messages) != 1 || fourth.Messages[0].Body == nil || *fourth.Messages[0].Body != "fourth" {
		t.Fatalf("after the failed request: %+v", fourth)
	}

	// A request the receive would refuse acks nothing.
	for _, c := range []struct {
		body   map[string]any
		status int
		code   string
	}{
		{map[string]any{"ack": receiptsOf(fourth.Messages), "wait": "31s"}, http.StatusBadRequest, "invalid_argument"},
		{map[string]any{"ack": receiptsOf(fourth.Messages), "max": 1001}, http.StatusBadRequest, "invalid_argument"},
		{map[string]any{"ack": receiptsOf(fourth.Messages), "body_encoding": "hex"}, http.StatusBadRequest, "invalid_argument"},
		{map[string]any{"ack": append(receiptsOf(fourth.Messages), "")}, http.StatusBadRequest, "invalid_argument"},
		{map[string]any{"ack": make([]string, engine.MaxReceive+1)}, http.StatusRequestEntityTooLarge, "too_large"},
		{map[string]any{"ack": []any{fourth.Messages[0].Receipt, 7}}, http.StatusBadRequest, "invalid_argument"},
		{map[string]any{"ack": "not a list"}, http.StatusBadRequest, "invalid_argument"},
	} {
		ts.wantError(ts.do("POST", "/v1/topics/jobs/groups/g/receive", c.body), c.status, c.code)
	}
	var acked api.AckResponse
	ts.call("POST", "/v1/topics/jobs/groups/g/ack", map[string]any{"receipts": receiptsOf(fourth.Messages)}, http.StatusOK, &acked)
	if acked.Acked != 1 {
		t.Fatalf("the last lease was not intact: %+v", acked)
	}
}

// TestReceiveBodyEncoding: text sends a UTF-8 body once, as body, and a
// binary one as body_base64; base64 sends body_base64 only.
func TestReceiveBodyEncoding(t *testing.T) {
	ts := newTestServer(t)
	binary := []byte{0xff, 0, 0xfe}
	ts.call("POST", "/v1/topics/enc/messages", map[string]any{"body": "héllo"}, http.StatusOK, nil)
	ts.call("POST", "/v1/topics/enc/messages", map[string]any{"body_base64": base64.StdEncoding.EncodeToString(binary)}, http.StatusOK, nil)
	for _, c := range []struct {
		enc               api.BodyEncoding
		textBody, textB64 bool
	}{{api.BodyText, true, false}, {api.BodyBase64, false, true}, {api.BodyBoth, true, true}} {
		group := "g" + string(c.enc)
		out := ts.receiveAck("enc", group, map[string]any{"body_encoding": c.enc, "max": 2, "wait": "5s", "invisible": "1h"})
		deadline := time.Now().Add(5 * time.Second)
		for len(out.Messages) < 2 && time.Now().Before(deadline) {
			more := ts.receiveAck("enc", group, map[string]any{"body_encoding": c.enc, "wait": "1s", "invisible": "1h"})
			out.Messages = append(out.Messages, more.Messages...)
		}
		if len(out.Messages) != 2 {
			t.Fatalf("%s: received %d of 2", c.enc, len(out.Messages))
		}
		for _, m := range out.Messages {
			isText := m.Body != nil && *m.Body == "héllo" || m.BodyBase64 == base64.StdEncoding.EncodeToString([]byte("héllo"))
			switch {
			case isText && (m.Body != nil) != c.textBody, isText && (m.BodyBase64 != "") != c.textB64:
				t.Errorf("%s: text message sent as %+v", c.enc, m)
			case !isText && (m.Body != nil || m.BodyBase64 != base64.StdEncoding.EncodeToString(binary)):
				t.Errorf("%s: binary message sent as %+v", c.enc, m)
			}
		}
	}
}

// TestAppendJSONStringEveryByteEveryPlace puts each byte value, and a few
// multi-byte runes, at every offset of a plain string long enough for
// the eight-byte fast path, and holds the result to encoding/json's.
func TestAppendJSONStringEveryByteEveryPlace(t *testing.T) {
	const plain = "abcdefghijklmnopqrstuvwx"
	var inserts []string
	for c := range 256 {
		inserts = append(inserts, string([]byte{byte(c)}))
	}
	inserts = append(inserts, "é", "\u2028", "😀", "\xc3")
	for _, ins := range inserts {
		for at := 0; at <= 17; at++ {
			s := plain[:at] + ins + plain[at:]
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
				t.Fatalf("%q: got %s, want %s", s, got, want)
			}
		}
	}
}
