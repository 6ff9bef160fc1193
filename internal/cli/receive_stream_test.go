package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/hourglasstest"
)

// --follow --stream --ack on a real broker: every message printed once and
// acked up the stream; on interrupt the acks already sent are confirmed,
// and what was leased ahead goes back (nothing left in flight).
func TestReceiveFollowStreamAcks(t *testing.T) {
	const n = 7
	srv, ctx, rctx := streamRig(t, n, func(acked uint64) bool { return acked == n }) // interrupt once all are acked
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": srv.URL})
	r.ctx = rctx
	res := r.run("receive", "--topic", "t", "--group", "g", "--follow", "--stream", "--ack", "--max", "2", "--window", "4")
	res.wantCode(t, ExitOK)
	for i := range n {
		if got := strings.Count(squash(res.stdout), squash("body: m"+itoa(int64(i))+"\n")); got != 1 {
			t.Errorf("message m%d printed %d times:\n%s", i, got, res.stdout)
		}
	}
	if !strings.Contains(res.stderr, "stopped: 7 received") {
		t.Errorf("stderr %q", res.stderr)
	}
	gs, err := srv.Client.Groups(ctx, "t")
	if err != nil || len(gs) != 1 || gs[0].Acked != n || gs[0].InFlight != 0 {
		t.Fatalf("group after the follow: %+v %v; want %d acked, none in flight", gs, err, n)
	}
}

func TestReceiveStreamFlags(t *testing.T) {
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": "http://127.0.0.1:1"})
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--stream"}, "--stream needs --follow"},
		{[]string{"--follow", "--stream", "--wait", "1s"}, "--wait has no meaning with --stream"},
		{[]string{"--follow", "--window", "10"}, "--window needs --stream"},
		{[]string{"--follow", "--stream", "--window", "-1"}, "must not be negative"},
	} {
		res := r.run(append([]string{"receive", "--topic", "t", "--group", "g"}, c.args...)...)
		if res.code != ExitUsage || !strings.Contains(res.stderr, c.says) {
			t.Errorf("%v: exit %d, stderr %q; want usage error saying %q", c.args, res.code, res.stderr, c.says)
		}
	}
}

// Interrupted mid-stream with --ack, the command prints only what it acked:
// what the broker had written ahead is neither acked nor printed (it comes
// back when its lease ends). A review found 87 of 200 printed and not acked.
func TestReceiveFollowStreamInterruptPrintsOnlyAcked(t *testing.T) {
	srv, ctx, rctx := streamRig(t, 200, func(acked uint64) bool { return acked > 0 }) // interrupt after the first ack
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": srv.URL})
	r.ctx = rctx
	res := r.run("receive", "--topic", "t", "--group", "g", "--follow", "--stream", "--ack", "--max", "1", "--window", "100")
	res.wantCode(t, ExitOK)
	printed := strings.Count(res.stdout, "message ")
	gs, err := srv.Client.Groups(ctx, "t")
	if err != nil || len(gs) != 1 {
		t.Fatal(gs, err)
	}
	if uint64(printed) != gs[0].Acked {
		t.Fatalf("printed %d, acked %d: a message printed and not acked comes back", printed, gs[0].Acked)
	}
	if !strings.Contains(res.stderr, "stopped: "+itoa(int64(printed))+" received") {
		t.Errorf("stderr %q, want the count of what was printed", res.stderr)
	}
}

// streamRig starts a broker holding n messages "m0"... in topic t, and
// returns it with a context that is cancelled (an interrupt) once group
// g's acked count satisfies stop, or after 20 s.
func streamRig(t *testing.T, n int, stop func(acked uint64) bool) (*hourglasstest.Server, context.Context, context.Context) {
	t.Helper()
	srv := hourglasstest.NewServer(t)
	ctx := context.Background()
	for i := range n {
		if _, err := srv.Client.Send(ctx, "t", client.Message{Body: []byte("m" + itoa(int64(i)))}); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() {
		defer cancel()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if gs, err := srv.Client.Groups(ctx, "t"); err == nil && len(gs) == 1 && stop(gs[0].Acked) {
				return
			}
		}
	}()
	return srv, ctx, rctx
}
