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

// TestGroupsAdminCommands runs the group commands against a real broker:
// create with a policy before the first send, update a group a receive
// made, pause and resume it, seek it, each as text and --json; bad
// command lines are usage errors.
func TestGroupsAdminCommands(t *testing.T) {
	srv := hourglasstest.NewServer(t)
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": srv.URL})
	res := r.run("groups", "create", "workers", "--topic", "jobs", "--max-attempts", "2")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "created group workers of topic jobs: 2 attempts") {
		t.Fatalf("create before the first send: %s", res.stdout)
	}
	ctx := context.Background()
	if _, err := srv.Client.Send(ctx, "jobs", client.Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		got, err := srv.Client.Receive(ctx, "jobs", "other", client.ReceiveOptions{Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 {
			if _, err := srv.Client.Ack(ctx, "jobs", "other", got[0].Receipt); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing received")
		}
	}
	res = r.run("groups", "update", "other", "--topic", "jobs", "--max-attempts", "5", "--json")
	res.wantCode(t, ExitOK)
	var g client.GroupInfo
	if err := json.Unmarshal([]byte(res.stdout), &g); err != nil || g.Config.MaxAttempts != 5 || g.Config.BackoffBase != time.Second {
		t.Fatalf("update --json: %v %+v\n%s", err, g, res.stdout)
	}
	res = r.run("groups", "pause", "other", "--topic", "jobs")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "group other of topic jobs: paused; 5 attempts") {
		t.Fatalf("pause: %s", res.stdout)
	}
	if res = r.run("groups", "--topic", "jobs"); !strings.Contains(res.stdout, "other (paused)") {
		t.Fatalf("list does not show the pause:\n%s", res.stdout)
	}
	res = r.run("groups", "seek", "other", "--topic", "jobs", "--to", "0")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "1 messages delivered again") {
		t.Fatalf("seek --to 0: %s", res.stdout)
	}
	res = r.run("groups", "seek", "other", "--topic", "jobs", "--to", "now", "--json")
	res.wantCode(t, ExitOK)
	var sr struct {
		Group  client.GroupInfo `json:"group"`
		Queues []struct{ From, To uint64 }
	}
	if err := json.Unmarshal([]byte(res.stdout), &sr); err != nil || sr.Group.Backlog != 0 || !sr.Group.Paused {
		t.Fatalf("seek --to now --json: %v %+v", err, sr)
	}
	r.run("groups", "resume", "other", "--topic", "jobs").wantCode(t, ExitOK)
	for _, bad := range [][]string{
		{"groups", "update", "other", "--topic", "jobs"},
		{"groups", "seek", "other", "--topic", "jobs"},
		{"groups", "seek", "other", "--topic", "jobs", "--to", "-5x"},
		{"groups", "pause", "--topic", "jobs"},
		{"groups", "update", "other", "--topic", "jobs", "--max-attempts", "-1"},
	} {
		if res := r.run(bad...); res.code != ExitUsage {
			t.Errorf("%v: exit %d, want usage error; %s", bad, res.code, res.stderr)
		}
	}
	res = r.run("groups", "update", "other", "--topic", "jobs", "--max-attempts", "5000")
	res.wantCode(t, ExitFailed)
	if !strings.Contains(res.stderr, "invalid_argument") {
		t.Errorf("a policy the broker refuses: %s", res.stderr)
	}
}
