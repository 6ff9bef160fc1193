package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/broker"
)

// startServer runs a real broker in-process on a free loopback port with
// a temporary data directory and returns its base URL. It is stopped,
// gracefully, when the test ends.
func startServer(t *testing.T) string {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- broker.Run(ctx, cfg, logger, func(a string) { addr <- a }) }()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("broker.Run: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the server did not start within 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker.Run: %v", err)
		}
	})
	return url
}

// readReport decodes a JSON report.
func readReport(t *testing.T, path string) Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return rep
}

// TestBenchAgainstRealServer is the short acceptance run of make test: a
// few thousand messages over two tiers against a real broker, failing on
// any lost or early message.
func TestBenchAgainstRealServer(t *testing.T) {
	url := startServer(t)
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "report.json"), filepath.Join(dir, "chart.svg")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{
		"--server", url, "-n", "3000", "--tiers", "200ms,1s", "--producers", "4", "--batch", "50",
		"--consumers", "4", "--deadline", "10s", "--progress", "0", "--json", jsonPath, "--svg", svgPath,
	}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	rep := readReport(t, jsonPath)
	if rep.Total.Sent != 3000 || rep.Total.Received != 3000 {
		t.Errorf("total sent %d received %d, want 3000 and 3000", rep.Total.Sent, rep.Total.Received)
	}
	if rep.Total.Lost != 0 || rep.Total.Early != 0 {
		t.Errorf("lost %d early %d (up to %.3f ms), want none", rep.Total.Lost, rep.Total.Early, rep.Total.EarlyMaxMs)
	}
	if len(rep.Tiers) != 2 || rep.Tiers[0].Name != "200ms" || rep.Tiers[1].Name != "1s" {
		t.Fatalf("tiers %+v, want 200ms and 1s", rep.Tiers)
	}
	for _, row := range rep.Tiers {
		if row.Sent != 1500 || row.Received != 1500 {
			t.Errorf("tier %s: sent %d received %d, want 1500 each", row.Name, row.Sent, row.Received)
		}
		l := row.Lateness
		if l.Count != 1500 || l.Min < 0 || !(l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
			t.Errorf("tier %s: lateness %+v is not an ordered summary of 1500 non-negative values", row.Name, l)
		}
	}
	if !strings.Contains(stdout.String(), "PASS") {
		t.Errorf("the table does not say PASS")
	}
	chart, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := histogramBars(t, parseSVG(t, chart)); got[0] != 1500 || got[1] != 1500 {
		t.Errorf("the chart's histogram holds %v messages per tier, want 1500 each", got)
	}
}

// TestBenchStreamingConsumers runs the bench's consumers as streaming
// receives (--stream) against a real broker: every message received once,
// none early or lost, and every one acked through the streams (no ack
// failure, no duplicate).
func TestBenchStreamingConsumers(t *testing.T) {
	url := startServer(t)
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{
		"--server", url, "-n", "3000", "--tiers", "200ms,1s", "--producers", "4", "--batch", "50",
		"--consumers", "4", "--stream", "--window", "200", "--max", "50", "--deadline", "10s", "--progress", "0", "--json", jsonPath,
	}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	rep := readReport(t, jsonPath)
	if rep.Total.Sent != 3000 || rep.Total.Received != 3000 || rep.Total.Lost != 0 || rep.Total.Early != 0 || rep.Total.Duplicated != 0 {
		t.Errorf("total %+v: want 3000 sent and received, none lost, early or duplicated", rep.Total)
	}
	if rep.Receives.AckFailures != 0 || rep.Receives.Errors != 0 || rep.Receives.Redelivered != 0 {
		t.Errorf("receives %+v: want no ack failure, no error, no redelivery", rep.Receives)
	}
}

// --window is a stream's: without --stream it is refused.
func TestBenchWindowNeedsStream(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--server", "http://127.0.0.1:1", "-n", "10", "--window", "5"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "--window needs --stream") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
