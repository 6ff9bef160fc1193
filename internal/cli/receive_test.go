package cli

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestReceivePrintsAndAcks(t *testing.T) {
	due := now.UnixMilli()
	msgs := `{"messages":[` +
		`{"id":"0001","receipt":"r1","attempt":1,"queue":2,"offset":5,"key":"order-123","tag":"close","properties":{"p":"v"},"body":"close unpaid order 123","body_base64":"Y2xvc2UgdW5wYWlkIG9yZGVyIDEyMw==","due":` + itoa(due) + `,"visible":` + itoa(due+3) + `},` +
		`{"id":"0002","receipt":"r2","attempt":2,"queue":0,"offset":0,"body_base64":"/wA=","due":` + itoa(due) + `,"visible":` + itoa(due) + `}]}`
	f := newFakeServer(t, map[string]fakeResponse{
		"POST /v1/topics/orders/groups/billing/receive": okJSON(msgs),
		"POST /v1/topics/orders/groups/billing/ack":     okJSON(`{"acked":2}`),
	})
	r := newRunner(t, f.env())
	res := r.run("receive", "--topic", "orders", "--group", "billing", "--wait", "20s", "--max", "5", "--invisible", "1m", "--ack")
	res.wantCode(t, ExitOK)
	for _, want := range []string{
		"message 0001 (queue 2, offset 5, attempt 1)",
		"key:         order-123",
		"tag:         close",
		"properties:  p=v",
		"due:         2030-03-17T17:46:40.000Z, visible 3ms late",
		"receipt:     r1",
		"body:        close unpaid order 123",
		"message 0002 (queue 0, offset 0, attempt 2)",
		"body:        (base64) /wA=",
		"acked 2",
	} {
		if !strings.Contains(squash(res.stdout), squash(want)) {
			t.Errorf("output lacks %q:\n%s", want, res.stdout)
		}
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want receive and ack", len(reqs))
	}
	if want := map[string]any{"max": float64(5), "wait": "20s", "invisible": "1m0s"}; !reflect.DeepEqual(reqs[0].Body, want) {
		t.Errorf("receive body %v, want %v", reqs[0].Body, want)
	}
	if want := map[string]any{"receipts": []any{"r1", "r2"}}; !reflect.DeepEqual(reqs[1].Body, want) {
		t.Errorf("ack body %v, want %v", reqs[1].Body, want)
	}

	// --json: one API-format object per line, nothing else on stdout.
	res = r.run("receive", "--json", "--topic", "orders", "--group", "billing", "--ack")
	res.wantCode(t, ExitOK)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("--json printed %d lines, want 2:\n%s", len(lines), res.stdout)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil || m["body_base64"] != "/wA=" || m["receipt"] != "r2" {
		t.Errorf("line %q (%v)", lines[1], err)
	}
}

func TestReceiveNothing(t *testing.T) {
	f := newFakeServer(t, map[string]fakeResponse{"POST /v1/topics/t/groups/g/receive": okJSON(`{"messages":[]}`)})
	res := newRunner(t, f.env()).run("receive", "--topic", "t", "--group", "g", "--ack", "--wait", "1s")
	res.wantCode(t, ExitOK)
	if res.stdout != "" || !strings.Contains(res.stderr, "no message (waited 1s)") {
		t.Errorf("%+v", res)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests: acked nothing?", n)
	}
}

func TestReceiveFollowStopsOnCancel(t *testing.T) {
	f := newFakeServer(t, map[string]fakeResponse{
		"POST /v1/topics/t/groups/g/receive": okJSON(`{"messages":[{"id":"0001","receipt":"r1","attempt":1,"body":"x","body_base64":"eA==","due":1,"visible":1}]}`),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onReq = func(n int) {
		if n == 3 {
			cancel() // like Ctrl-C after the third poll
		}
	}
	r := newRunner(t, f.env())
	r.ctx = ctx
	res := r.run("receive", "--topic", "t", "--group", "g", "--follow")
	res.wantCode(t, ExitOK)
	if got := strings.Count(res.stdout, "message 0001"); got < 2 || got > 3 {
		t.Errorf("printed %d messages, want 2 or 3 (the third poll may be cut by the cancel):\n%s", got, res.stdout)
	}
	if !strings.Contains(res.stderr, "stopped:") {
		t.Errorf("stderr %q lacks the final count", res.stderr)
	}
	if b := f.requests()[0].Body; b["wait"] != "20s" {
		t.Errorf("follow without --wait polls with %v, want 20s", b["wait"])
	}
}

func TestReceiveFollowEndsOnPermanentError(t *testing.T) {
	f := newFakeServer(t, map[string]fakeResponse{
		"POST /v1/topics/t/groups/g/receive": {401, `{"error":{"code":"unauthenticated","message":"missing bearer token"}}`},
	})
	res := newRunner(t, f.env()).run("receive", "--topic", "t", "--group", "g", "--follow")
	res.wantCode(t, ExitFailed)
	if !strings.Contains(res.stderr, "unauthenticated (HTTP 401): missing bearer token") {
		t.Errorf("stderr %q", res.stderr)
	}
}
