package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// newVirtualServer is the HTTP API of an embedded broker on the virtual
// clock, in a temporary directory.
func newVirtualServer(t *testing.T, dir string) *testServer {
	t.Helper()
	ts, _ := openVirtual(t, dir)
	return ts
}

// openVirtual is newVirtualServer that also returns its close function
// (idempotent; also run at cleanup), for restarts.
func openVirtual(t *testing.T, dir string) (*testServer, func()) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.Clock = api.ClockVirtual
	cfg.Flush = "async"
	b, err := OpenEmbedded(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, cfg: cfg, eng: b.Engine, h: b.Handler, srv: httptest.NewServer(b.Handler)}
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			ts.srv.Close()
			if err := b.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	t.Cleanup(closeAll)
	return ts, closeAll
}

// TestVirtualClockAdvanceDelivers: a message due in 30 minutes is not
// visible before an advance of 30 minutes and is visible when the advance
// answers, without any wait.
func TestVirtualClockAdvanceDelivers(t *testing.T) {
	ts := newVirtualServer(t, t.TempDir())
	var h api.Health
	ts.call("GET", "/healthz", nil, http.StatusOK, &h)
	if h.Clock != api.ClockVirtual {
		t.Fatalf("healthz clock %q, want virtual", h.Clock)
	}
	var before api.ClockTime
	ts.call("GET", "/v1/clock", nil, http.StatusOK, &before)
	var rc api.Receipt
	ts.call("POST", "/v1/topics/orders/messages", map[string]any{"body": "close order 7", "delay": "30m"}, http.StatusOK, &rc)
	var got api.ReceiveResponse
	ts.call("POST", "/v1/topics/orders/groups/g/receive", nil, http.StatusOK, &got)
	if len(got.Messages) != 0 {
		t.Fatalf("received %d messages before the advance", len(got.Messages))
	}
	var ct api.ClockTime
	ts.call("POST", "/v1/clock/advance", map[string]any{"by": "29m59.999s"}, http.StatusOK, &ct)
	if !ct.Settled || ct.Mode != api.ClockVirtual || ct.Now < before.Now+1799999 {
		t.Fatalf("advance answered %+v (before %d)", ct, before.Now)
	}
	if ct.Now < rc.Due {
		// Not yet due: nothing may be visible.
		ts.call("POST", "/v1/topics/orders/groups/g/receive", nil, http.StatusOK, &got)
		if len(got.Messages) != 0 {
			t.Fatalf("received a message due at %d at virtual time %d", rc.Due, ct.Now)
		}
	}
	ts.call("POST", "/v1/clock/advance", map[string]any{"to": rc.Due}, http.StatusOK, &ct)
	if !ct.Settled || ct.Now != rc.Due {
		t.Fatalf("advance to the due time answered %+v, want now %d", ct, rc.Due)
	}
	ts.call("POST", "/v1/topics/orders/groups/g/receive", nil, http.StatusOK, &got)
	if len(got.Messages) != 1 || got.Messages[0].ID != rc.ID || got.Messages[0].Visible != rc.Due {
		t.Fatalf("after the advance received %+v, want %s visible at %d", got.Messages, rc.ID, rc.Due)
	}
}

func TestVirtualClockBadAdvance(t *testing.T) {
	ts := newVirtualServer(t, t.TempDir())
	var now api.ClockTime
	ts.call("GET", "/v1/clock", nil, http.StatusOK, &now)
	for _, body := range []string{
		`{}`, `{"by":"-1m"}`, `{"by":"soon"}`, `{"by_ms":-5}`, `{"by":"1m","by_ms":60000}`,
		`{"to":1}`, `{"by":"1000000h"}`, `{"by_ms":"5"}`, `{"to":` + strconv.FormatInt(int64(now.Now)-1, 10) + `}`,
		`{"to":20242884562911}`,                            // year 2611: its Duration overflowed into a 1 s advance (a review)
		`{"by":"1s","by_ms":0}`, `{"by_ms":0}`, `{"to":0}`, // a zero field is a field: exactly one
	} {
		ts.wantError(ts.do("POST", "/v1/clock/advance", body), http.StatusBadRequest, "invalid_argument")
	}
	var after api.ClockTime
	ts.call("GET", "/v1/clock", nil, http.StatusOK, &after)
	if after.Now < now.Now || after.Now > now.Now+60_000 {
		t.Fatalf("refused advances moved the clock from %d to %d", now.Now, after.Now)
	}
}

func TestSystemClockRefusesAdvance(t *testing.T) {
	ts := newTestServer(t)
	ts.wantError(ts.do("POST", "/v1/clock/advance", `{"by":"30m"}`), http.StatusConflict, "failed_precondition")
	var ct api.ClockTime
	ts.call("GET", "/v1/clock", nil, http.StatusOK, &ct)
	if ct.Mode != api.ClockSystem || ct.Now == 0 {
		t.Fatalf("GET /v1/clock on the system clock: %+v", ct)
	}
}

// TestClockModeOfDataDir: a directory belongs to the clock it was made
// with; neither broker opens the other's.
func TestClockModeOfDataDir(t *testing.T) {
	virt := filepath.Join(t.TempDir(), "new")
	if err := checkClockMode(virt, api.ClockVirtual); err != nil {
		t.Fatalf("virtual on a missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(virt, virtualMarker)); err != nil {
		t.Fatalf("no marker written: %v", err)
	}
	if err := checkClockMode(virt, api.ClockVirtual); err != nil {
		t.Fatalf("virtual on its own directory: %v", err)
	}
	if err := checkClockMode(virt, api.ClockSystem); err == nil || !strings.Contains(err.Error(), "virtual clock") {
		t.Fatalf("system clock on a virtual directory: %v, want a refusal", err)
	}
	real := t.TempDir()
	if err := os.WriteFile(filepath.Join(real, "IDENTITY"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkClockMode(real, api.ClockSystem); err != nil {
		t.Fatalf("system on a system directory: %v", err)
	}
	if err := checkClockMode(real, api.ClockVirtual); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("virtual on a system directory: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(real, virtualMarker)); err == nil {
		t.Fatal("a refused directory was marked")
	}
}

// TestVirtualClockSurvivesRestart: the broker time of a virtual directory
// does not fall back to the real time after a restart, and an advance
// after it still moves it.
func TestVirtualClockSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ts, closeFirst := openVirtual(t, dir)
	var ct api.ClockTime
	ts.call("POST", "/v1/clock/advance", map[string]any{"by": "240h"}, http.StatusOK, &ct)
	closeFirst()
	ts = newVirtualServer(t, dir)
	var after api.ClockTime
	ts.call("GET", "/v1/clock", nil, http.StatusOK, &after)
	if after.Now < ct.Now {
		t.Fatalf("after a restart the virtual time is %d, before it was %d", after.Now, ct.Now)
	}
	ts.call("POST", "/v1/clock/advance", map[string]any{"by": "1h"}, http.StatusOK, &ct)
	if ct.Now < after.Now+3_600_000 {
		t.Fatalf("advance after a restart answered %d, want at least %d", ct.Now, after.Now+3_600_000)
	}
}
