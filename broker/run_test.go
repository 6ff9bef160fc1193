package broker

import (
	"context"
	"encoding/json"
	"github.com/hourglass-mq/hourglass/api"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// TestRunLifecycle: Run listens on a free port, reports it, serves, and on
// cancellation ends a waiting long poll, stops and closes the engine so
// that a send answered before is found when the directory is reopened.
func TestRunLifecycle(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.DrainTimeout = 5 * time.Second
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, runErr := startRun(ctx, t, cfg, logger)
	client := &http.Client{}
	defer client.CloseIdleConnections()
	resp, err := client.Post(base+"/v1/topics/life/messages", "application/json", strings.NewReader(`{"body":"keep me","delay":"1h"}`))
	if err != nil {
		t.Fatal(err)
	}
	var rc api.Receipt
	json.NewDecoder(resp.Body).Decode(&rc)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || rc.ID == "" {
		t.Fatalf("send: %d %+v", resp.StatusCode, rc)
	}

	polled := make(chan int, 1)
	go func() {
		resp, err := client.Post(base+"/v1/topics/life/groups/g/receive", "application/json", strings.NewReader(`{"wait":"30s"}`))
		if err != nil {
			polled <- 0
			return
		}
		resp.Body.Close()
		polled <- resp.StatusCode
	}()
	// Wait until the long poll has created its group, then stop.
	for deadline := time.Now().Add(10 * time.Second); groupCount(t, client, base+"/v1/topics/life/groups") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the long poll did not start within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if code := <-polled; code != http.StatusOK {
		t.Fatalf("long poll during shutdown answered %d, want 200", code)
	}
	if _, err := client.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after Run returned")
	}

	eng, err := engine.Open(cfg.EngineOptions(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	id, err := message.ParseID(rc.ID)
	if err != nil {
		t.Fatal(err)
	}
	info, err := eng.Inspect(id)
	if err != nil || info.State != engine.StatePending {
		t.Fatalf("after restart: %+v, %v", info, err)
	}
}

// groupCount is the number of groups GET url lists; -1 when it fails.
func groupCount(t *testing.T, client *http.Client, url string) int {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var gl api.GroupList
	if json.NewDecoder(resp.Body).Decode(&gl) != nil {
		return -1
	}
	return len(gl.Groups)
}

// startRun starts Run until ctx ends and returns its base URL, once it
// reported its address, and the channel of Run's result.
func startRun(ctx context.Context, t *testing.T, cfg Config, logger *slog.Logger) (base string, runErr chan error) {
	t.Helper()
	addrc := make(chan string, 1)
	runErr = make(chan error, 1)
	go func() { runErr <- Run(ctx, cfg, logger, func(addr string) { addrc <- addr }) }()
	select {
	case addr := <-addrc:
		base = "http://" + addr
	case err := <-runErr:
		t.Fatalf("Run returned before listening: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not report its address")
	}
	return base, runErr
}

func TestRunRejectsBadConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Flush = "never"
	if err := Run(context.Background(), cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "-flush") {
		t.Fatalf("Run with a bad config: %v", err)
	}
	cfg = DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "192.0.2.1:7070" // TEST-NET-1: not an address of this machine
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := Run(context.Background(), cfg, logger, nil); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Run with an address it cannot bind: %v", err)
	}
}
