package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/hourglasstest"
)

// TestTraceCommand runs `hourglass trace` against a real broker: by ID and
// by key, as text and --json, after a nack, a redelivery and an ack; a
// forged ID exits 1 with not_found.
func TestTraceCommand(t *testing.T) {
	srv := hourglasstest.NewServer(t)
	ctx := context.Background()
	rc, err := srv.Client.Send(ctx, "jobs", client.Message{Key: "order-7", Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	receive := func() client.Received {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			got, err := srv.Client.Receive(ctx, "jobs", "billing", client.ReceiveOptions{Max: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 1 {
				return got[0]
			}
		}
		t.Fatal("nothing to receive")
		return client.Received{}
	}
	if err := srv.Client.Nack(ctx, "jobs", "billing", receive().Receipt, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	srv.Advance(time.Second)
	if _, err := srv.Client.Ack(ctx, "jobs", "billing", receive().Receipt); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": srv.URL})
	want := "sent fell_due visible delivered nacked delivered acked"
	var tr client.Trail
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		res := r.run("trace", "--json", rc.ID)
		res.wantCode(t, ExitOK)
		if err := json.Unmarshal([]byte(res.stdout), &tr); err != nil {
			t.Fatalf("trace --json: %v\n%s", err, res.stdout)
		}
		var kinds []string
		for _, ev := range tr.Events {
			kinds = append(kinds, ev.Kind)
		}
		if strings.Join(kinds, " ") == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trail kinds %v, want %s", kinds, want)
		}
	}
	res := r.run("trace", "--topic", "jobs", "--key", "order-7")
	res.wantCode(t, ExitOK)
	for _, w := range []string{"trail of " + rc.ID + " (topic jobs)", "delivered     group billing, attempt 1; lease until",
		"nacked        group billing, attempt 1; back at", "delivered     group billing, attempt 2", "acked         group billing, attempt 2",
		tr.Events[0].At.String() + "  sent"} {
		if !strings.Contains(res.stdout, w) {
			t.Errorf("trace output lacks %q:\n%s", w, res.stdout)
		}
	}
	forged := rc.ID[:31] + map[bool]string{true: "0", false: "1"}[rc.ID[31] != '0']
	res = r.run("trace", forged)
	res.wantCode(t, ExitFailed)
	if !strings.Contains(res.stderr, "not_found") || strings.Contains(res.stderr, rc.ID) {
		t.Errorf("forged ID: %s", res.stderr)
	}
	r.run("trace").wantCode(t, ExitUsage)
}
