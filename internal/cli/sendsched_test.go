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
