package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/schedule"
)

// newVirtualServer is the HTTP API of an embedded broker on the virtual
// clock, in a temporary directory.
func newVirtualServer(t *testing.T, dir string) *testServer {
	t.Helper()
	ts, _ := openVirtual(t, dir)
	return ts
}

// openVirtual is newVirtualServer that also returns its close function
// (idempotent; also run at cleanup), for restarts. It opens what a broker
// on -clock virtual opens (package broker): the engine on a virtual clock
// that starts at the real time, and the schedules on that clock.
func openVirtual(t *testing.T, dir string) (*testServer, func()) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := DefaultOptions()
	opts.DataDir = dir
	opts.Virtual = clock.NewVirtual(time.Now())
	eo := serveEngineOptions(dir, logger)
	eo.Clock, eo.Flush = opts.Virtual, engine.FlushAsync
	eng, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	opts.Schedules, err = schedule.Open(schedule.Options{Dir: filepath.Join(dir, "schedules"), Broker: eng,
		Clock: eo.Clock, MaxBatch: opts.MaxBatch, MaxBytes: 256 << 20, Limits: eo.Limits, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	h := New(eng, opts, logger, nil)
	ts := &testServer{t: t, opts: opts, eng: eng, h: h, srv: httptest.NewServer(h)}
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			ts.srv.Close()
			h.Drain()
			if err := opts.Schedules.Close(); err != nil {
				t.Errorf("close the schedules: %v", err)
			}
			if err := eng.Close(); err != nil {
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
