package e2e_test

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// refusedServe runs hourglass serve with args, which must refuse to
// start; the timeout ends it if it starts after all.
func refusedServe(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, binary, append([]string{"serve"}, args...)...).CombinedOutput()
}

type clockTime struct {
	Mode    string `json:"mode"`
	Now     int64  `json:"now"`
	Settled bool   `json:"settled"`
}

// TestVirtualClock: on a broker started with --clock virtual, a message
// due in 30 minutes arrives right after an advance of 30 minutes (over
// HTTP and with the CLI), bad advances are 400, and the directory stays
// a virtual one: a system-clock broker refuses it.
func TestVirtualClock(t *testing.T) {
	s := startServer(t, "", nil, "--clock", "virtual", "--grpc-listen", "")
	var h struct{ Clock string }
	s.call("GET", "/healthz", nil, http.StatusOK, &h)
	if h.Clock != "virtual" {
		t.Fatalf("healthz clock %q, want virtual", h.Clock)
	}
	if !strings.Contains(s.logs.String(), "VIRTUAL CLOCK") {
		t.Fatalf("no loud warning at start; output:\n%s", s.logs)
	}
	var r receipt
	s.call("POST", "/v1/topics/orders/messages", map[string]any{"key": "order-1", "body": "close order 1", "delay": "30m"}, http.StatusOK, &r)
	if got := s.receive("orders", "g", nil); len(got) != 0 {
		t.Fatalf("received %d messages before the advance", len(got))
	}
	var ct clockTime
	s.call("POST", "/v1/clock/advance", map[string]any{"by": "30m"}, http.StatusOK, &ct)
	if !ct.Settled || ct.Mode != "virtual" || ct.Now < r.Due {
		t.Fatalf("advance answered %+v; the message is due at %d", ct, r.Due)
	}
	got := s.receive("orders", "g", nil)
	if len(got) != 1 || got[0].ID != r.ID || got[0].Visible < r.Due {
		t.Fatalf("after the advance received %+v, want %s", got, r.ID)
	}

	for _, body := range []string{`{}`, `{"by":"-30m"}`, `{"by":"half an hour"}`, `{"to":1000}`, `{"by":"1m","to":1}`} {
		wantError(t, s.do("POST", "/v1/clock/advance", body), http.StatusBadRequest, "invalid_argument")
	}

	out, err := exec.Command(binary, "clock", "advance", "1h", "--server", s.base).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "virtual clock") {
		t.Fatalf("hourglass clock advance 1h: %v\n%s", err, out)
	}
	var after clockTime
	s.call("GET", "/v1/clock", nil, http.StatusOK, &after)
	if after.Now < ct.Now+3_600_000 {
		t.Fatalf("after the CLI's advance of 1h the clock is %d, was %d", after.Now, ct.Now)
	}

	if err := s.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, s.logs)
	}
	out, err = refusedServe(t, "--data-dir", s.dataDir, "--listen", "127.0.0.1:0", "--grpc-listen", "")
	if err == nil || !strings.Contains(string(out), "virtual clock") {
		t.Fatalf("a system-clock broker opened a virtual directory (%v):\n%s", err, out)
	}
}

// TestSystemClockRefusesAdvance: a production broker cannot have its time
// moved, and a virtual-clock broker refuses its data directory.
func TestSystemClockRefusesAdvance(t *testing.T) {
	s := startServer(t, "", nil, "--grpc-listen", "")
	wantError(t, s.do("POST", "/v1/clock/advance", map[string]any{"by": "30m"}), http.StatusConflict, "failed_precondition")
	out, err := exec.Command(binary, "clock", "advance", "30m", "--server", s.base).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "system clock") {
		t.Fatalf("hourglass clock advance on a system broker: %v\n%s", err, out)
	}
	var h struct{ Clock string }
	s.call("GET", "/healthz", nil, http.StatusOK, &h)
	if h.Clock != "system" {
		t.Fatalf("healthz clock %q, want system", h.Clock)
	}
	if err := s.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, s.logs)
	}
	out, err = refusedServe(t, "--data-dir", s.dataDir, "--listen", "127.0.0.1:0", "--grpc-listen", "", "--clock", "virtual")
	if err == nil || !strings.Contains(string(out), "not empty") {
		t.Fatalf("a virtual-clock broker opened a system directory (%v):\n%s", err, out)
	}
}
