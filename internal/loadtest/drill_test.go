package loadtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BrokerBinary is a program that is hourglass: this test binary, which
// TestMain (main_test.go, in the external test package, which may import
// the command line) sets up to run as hourglass in the processes the drill
// starts (package clitest), so the drill needs no go build.
var BrokerBinary string

// TestDrillLosesNothing is the short crash drill of make test: a real
// broker process is SIGKILLed twice while messages are sent and received, and no
// acknowledged message may be lost or arrive early.
func TestDrillLosesNothing(t *testing.T) {
	bin := BrokerBinary
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	jsonPath, svgPath := filepath.Join(dir, "drill.json"), filepath.Join(dir, "drill.svg")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := Main(ctx, []string{
		"--drill", "--binary", bin, "--data-dir", dataDir, "--server-args=--log-level=warn",
		"--kills", "2", "--downtime", "1s", "-n", "2000", "--tiers", "200ms,1s", "--batch", "20",
		"--invisible", "1s", "--linger", "2s", "--progress", "0", "--json", jsonPath, "--svg", svgPath,
	}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	rep := readReport(t, jsonPath)
	if rep.Total.Sent != 2000 || rep.Total.Lost != 0 || rep.Total.Early != 0 {
		t.Errorf("sent %d lost %d early %d, want 2000, 0, 0", rep.Total.Sent, rep.Total.Lost, rep.Total.Early)
	}
	// Sends whose answer a kill cut off were sent again with their dedup
	// IDs: none was resent as a new message.
	if rep.Sends.Unacknowledged != 0 || rep.Sends.Resent != rep.Sends.FailedRequests {
		t.Errorf("sends %+v: want every failed request resent with its dedup IDs, none unacknowledged", rep.Sends)
	}
	d := rep.Drill
	if d == nil || len(d.Kills) != 2 {
		t.Fatalf("drill report %+v, want 2 kills", d)
	}
	for i, k := range d.Kills {
		if !k.KilledAt.Before(k.RestartedAt) || k.ReadyAt.Before(k.RestartedAt) {
			t.Errorf("kill %d: killed %s restarted %s ready %s, out of order", i+1, k.KilledAt, k.RestartedAt, k.ReadyAt)
		}
		if k.DownMs < 1000 {
			t.Errorf("kill %d: down %v ms, want at least the 1s downtime", i+1, k.DownMs)
		}
	}
	if d.DueWhileDown.Sent+d.DueWhileUp.Sent != rep.Total.Sent {
		t.Errorf("due while down %d + up %d != %d sent", d.DueWhileDown.Sent, d.DueWhileUp.Sent, rep.Total.Sent)
	}
	if d.DataDir != dataDir {
		t.Errorf("data dir %q, want %q", d.DataDir, dataDir)
	}
	if entries, err := os.ReadDir(dataDir); err != nil || len(entries) == 0 {
		t.Errorf("the broker wrote nothing to its data directory (%v)", err)
	}
	if chart, err := os.ReadFile(svgPath); err != nil {
		t.Errorf("no chart: %v", err)
	} else if !bytes.Contains(chart, []byte(`class="down"`)) {
		t.Error("the chart shades no span when the broker was down")
	}
}
