package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServeAndClientCommands runs "serve" in-process on a free loopback
// port with the real server and engine, drives it with the client
// commands, and stops it like SIGINT does (by cancelling its context).
func TestServeAndClientCommands(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done, errb := startServe(ctx, t)

	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": url})
	res := r.run("send", "--json", "--topic", "orders", "--delay", "300ms", "--key", "order-123", "close unpaid order 123")
	res.wantCode(t, ExitOK)
	var receipt struct {
		ID  string `json:"id"`
		Due int64  `json:"due"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &receipt); err != nil || receipt.ID == "" {
		t.Fatalf("send --json printed %q (%v)", res.stdout, err)
	}

	res = r.run("inspect", "--topic", "orders", "--key", "order-123")
	res.wantCode(t, ExitOK)
	if !strings.Contains(squash(res.stdout), "id: "+receipt.ID) || !strings.Contains(squash(res.stdout), "state: pending") {
		t.Errorf("inspect before due:\n%s", res.stdout)
	}

	// A second message, cancelled by key, must never be received.
	r.run("send", "--topic", "orders", "--delay", "300ms", "--key", "order-456", "paid").wantCode(t, ExitOK)
	r.run("cancel", "--topic", "orders", "--key", "order-456").wantCode(t, ExitOK)
	res = r.run("cancel", "--topic", "orders", "--key", "order-456")
	res.wantCode(t, ExitFailed)
	if !strings.Contains(res.stderr, "failed_precondition (HTTP 409)") {
		t.Errorf("second cancel: %q", res.stderr)
	}

	res = r.run("receive", "--json", "--topic", "orders", "--group", "billing", "--wait", "10s", "--ack")
	res.wantCode(t, ExitOK)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("received %d messages, want 1:\n%s", len(lines), res.stdout)
	}
	var m struct {
		ID      string `json:"id"`
		Body    string `json:"body"`
		Due     int64  `json:"due"`
		Visible int64  `json:"visible"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	if m.ID != receipt.ID || m.Body != "close unpaid order 123" || m.Visible < receipt.Due {
		t.Errorf("received %+v for receipt %+v (visible before due?)", m, receipt)
	}

	res = r.run("groups", "--topic", "orders")
	res.wantCode(t, ExitOK)
	if f := strings.Fields(strings.Split(res.stdout, "\n")[1]); len(f) < 5 || f[0] != "billing" || f[3] != "1" || f[4] != "1" {
		t.Errorf("groups after one delivery and ack:\n%s", res.stdout)
	}

	cancel() // SIGINT
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("serve exited with %d after cancel: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down")
	}
}

// startServe runs 'hourglass serve' on a loopback port until ctx ends and
// returns its URL (from the listening line), the channel of its exit code
// and its stderr.
func startServe(ctx context.Context, t *testing.T) (url string, done chan int, errb *syncBuffer) {
	t.Helper()
	var out syncBuffer
	errb = &syncBuffer{}
	serveApp := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: errb, Now: time.Now,
		LookupEnv: func(k string) (string, bool) {
			return map[string]string{"HOURGLASS_LOG_LEVEL": "warn"}[k], k == "HOURGLASS_LOG_LEVEL"
		}}
	done = make(chan int, 1)
	go func() {
		done <- serveApp.Run(ctx, []string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--drain-timeout", "2s"})
	}()
	waitFor(t, "the listening line", 30*time.Second, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if u, ok := strings.CutPrefix(line, "listening on "); ok {
				url = u
				return true
			}
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, errb.String())
		default:
		}
		return false
	})
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("listening on %q", url)
	}
	return url, done, errb
}

func TestServeRejectsBadConfig(t *testing.T) {
	r := newRunner(t, map[string]string{"HOURGLASS_FLUSH": "sometimes"})
	res := r.run("serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	res.wantCode(t, ExitUsage)
	if !strings.Contains(res.stderr, `-flush "sometimes" is not sync or async`) {
		t.Errorf("stderr %q", res.stderr)
	}
	res = r.run("serve", "extra")
	res.wantCode(t, ExitUsage)
}

func TestDemo(t *testing.T) {
	r := newRunner(t, nil)
	// 2 s: the inspect step must see order-123 still pending on a loaded
	// machine, where the two sends and the cancel before it can take longer
	// than a short delay.
	res := r.run("demo", "--delay", "2s", "--dir", t.TempDir())
	res.wantCode(t, ExitOK)
	for _, want := range []string{
		"inspect by key order-123: state pending",
		`received "close unpaid order 123" (key order-123, attempt 1)`,
		"acked 1 message(s)",
		": state visible",
		"sent 2, fired 1, cancelled 1, pending 0",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, res.stdout)
		}
	}
	if res := r.run("demo", "--delay", "1h"); res.code != ExitUsage {
		t.Errorf("demo --delay 1h: %+v", res)
	}
}
