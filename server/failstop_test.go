package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestHealthzAfterStorageFailure: once a failed fsync stopped the engine,
// sends answer 503 unavailable and /healthz answers 503 "failed" with the
// cause, so that a supervisor or a load balancer sees it.
func TestHealthzAfterStorageFailure(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	cfg := DefaultOptions()
	cfg.DataDir = "/data"
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eo := serveEngineOptions(cfg.DataDir, logger)
	eo.FS = ff
	eng, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv := httptest.NewServer(New(eng, cfg, logger, nil))
	defer srv.Close()
	get := func() (int, api.Health) {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h api.Health
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, h
	}
	if code, h := get(); code != 200 || h.Status != "ok" {
		t.Fatalf("healthz before the failure: %d %+v", code, h)
	}
	ff.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.Contains(name, "log") {
			return syscall.EIO
		}
		return nil
	})
	resp, err := http.Post(srv.URL+"/v1/topics/t/messages", "application/json", strings.NewReader(`{"body":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("send whose fsync failed: %d, want 503", resp.StatusCode)
	}
	<-eng.Failed()
	if code, h := get(); code != http.StatusServiceUnavailable || h.Status != "failed" || !strings.Contains(h.Error, "fsync") {
		t.Fatalf("healthz after the failure: %d %+v", code, h)
	}
}
