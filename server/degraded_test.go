package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/vfs"
)

// getHealth returns /healthz's status and body.
func getHealth(t *testing.T, url string) (int, api.Health) {
	t.Helper()
	resp, err := http.Get(url + "/healthz")
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

// TestHealthzDegradedWhileFiresFail is issue 29's defect 8: with the disk
// full, the fire records of due messages fail and are retried, and
// /healthz answered ok. Now it answers 200 "degraded" with a problem that
// says due messages are not being made visible and why, and ok again once
// space is back and the messages are visible.
func TestHealthzDegradedWhileFiresFail(t *testing.T) {
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
	if code, h := getHealth(t, srv.URL); code != 200 || h.Status != "ok" || len(h.Problems) != 0 {
		t.Fatalf("healthz before the disk filled: %d %+v", code, h)
	}
	resp, err := http.Post(srv.URL+"/v1/topics/t/messages", "application/json", strings.NewReader(`{"body":"x","delay":"300ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("send: %d", resp.StatusCode)
	}
	ff.SetLimit(ff.Used())
	eventually(t, 5*time.Second, "a fire record failure", func() bool { return eng.Stats().FireErrors.Load() > 0 })
	code, h := getHealth(t, srv.URL)
	if code != 200 || h.Status != "degraded" || len(h.Problems) != 1 ||
		!strings.Contains(h.Problems[0], "due messages are not being made visible") || !strings.Contains(h.Problems[0], "disk full") {
		t.Fatalf("healthz while fire records fail: %d %+v", code, h)
	}
	ff.SetLimit(-1)
	eventually(t, 5*time.Second, "the message visible", func() bool { return eng.Stats().Fired.Load() == 1 })
	if code, h := getHealth(t, srv.URL); code != 200 || h.Status != "ok" {
		t.Fatalf("healthz after space came back: %d %+v", code, h)
	}
}
