package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
)

// TestTrailRoute: a message sent, received and acked over HTTP has a
// trail with each event and its time; a forged ID answers the same 404 as
// one past the head, naming nothing else; a malformed one answers 400.
func TestTrailRoute(t *testing.T) {
	ts := newTestServer(t)
	var rc api.Receipt
	ts.call("POST", "/v1/topics/jobs/messages", map[string]any{"body": "x", "key": "k"}, http.StatusOK, &rc)
	var got api.ReceiveResponse
	eventually(t, 5*time.Second, "the message to be received", func() bool {
		ts.call("POST", "/v1/topics/jobs/groups/g/receive", map[string]any{"max": 1}, http.StatusOK, &got)
		return len(got.Messages) == 1
	})
	ts.call("POST", "/v1/topics/jobs/groups/g/ack", map[string]any{"receipts": []string{got.Messages[0].Receipt}}, http.StatusOK, nil)
	var tr api.Trail
	ts.call("GET", "/v1/messages/"+rc.ID+"/trail", nil, http.StatusOK, &tr)
	var kinds []string
	for _, ev := range tr.Events {
		kinds = append(kinds, ev.Kind)
		if ev.At == 0 || ev.AtTime != ev.At.RFC3339() || ev.Message != rc.ID {
			t.Errorf("event %+v: no time, or of another message", ev)
		}
	}
	if strings.Join(kinds, " ") != "sent fell_due visible delivered acked" || tr.ID != rc.ID || tr.Topic != "jobs" || tr.Partial {
		t.Fatalf("trail %+v", tr)
	}
	if d := tr.Events[3]; d.Group != "g" || d.Attempt != 1 || d.Until <= d.At {
		t.Fatalf("delivery %+v", d)
	}
	// Forged: the right position with another tag, and a position past
	// the head. Both say not found, and neither names the real message.
	forged := rc.ID[:31] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", rc.ID[31])+1)%16])
	far := "7fffffffffffffff" + rc.ID[16:]
	for _, id := range []string{forged, far} {
		r := ts.do("GET", "/v1/messages/"+id+"/trail", nil)
		ts.wantError(r, http.StatusNotFound, "not_found")
		if strings.Contains(string(r.body), rc.ID) || strings.Contains(string(r.body), "jobs") {
			t.Fatalf("404 for %s tells of other things: %s", id, r.body)
		}
	}
	ts.wantError(ts.do("GET", "/v1/messages/xyz/trail", nil), http.StatusBadRequest, "invalid_argument")
}
