package cli

import (
	"strings"
	"testing"
)

// TestSendDedupID: --dedup-id goes on the wire, and a duplicate receipt
// says that nothing was stored.
func TestSendDedupID(t *testing.T) {
	f := newFakeServer(t, map[string]fakeResponse{
		"POST /v1/topics/orders/messages": okJSON(`{"id":"000a","topic":"orders","queue":2,"due":1,"due_time":"x","duplicate":true}`),
	})
	r := newRunner(t, f.env())
	res := r.run("send", "--topic", "orders", "--dedup-id", "pay-42", "charge 42")
	res.wantCode(t, ExitOK)
	if got := f.requests()[0].Body["dedup_id"]; got != "pay-42" {
		t.Fatalf("dedup_id on the wire: %v", got)
	}
	if !strings.HasPrefix(res.stdout, "duplicate of 000a in orders") {
		t.Fatalf("stdout %q", res.stdout)
	}
}

// TestSendDeadlineAndWindow: --deadline, --ttl and --window go on the wire.
func TestSendDeadlineAndWindow(t *testing.T) {
	f := newFakeServer(t, map[string]fakeResponse{
		"POST /v1/topics/offers/messages": okJSON(`{"id":"000a","topic":"offers","queue":0,"due":1,"due_time":"x"}`),
	})
	r := newRunner(t, f.env())
	r.run("send", "--topic", "offers", "--ttl", "2h", "--window", "1500us", "x").wantCode(t, ExitOK)
	r.run("send", "--topic", "offers", "--deadline", "2030-01-02T09:00:00Z", "y").wantCode(t, ExitOK)
	reqs := f.requests()
	if b := reqs[0].Body; b["ttl"] != "2h0m0s" || b["window"] != float64(2) {
		t.Fatalf("request %v", b)
	}
	if b := reqs[1].Body; b["deadline"] != float64(1893574800000) {
		t.Fatalf("request %v", b)
	}
	r.run("send", "--topic", "offers", "--deadline", "tomorrow", "z").wantCode(t, ExitUsage)
}
