package kafkabench_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/internal/clitest"
	"github.com/hourglass-mq/hourglass/kafkamode/kafkabench"
)

// TestMain lets this test binary stand in for hourglass: the benchmark
// runs as `hourglass bench kafka` in a process of its own, and its
// workers and floor are that binary again.
func TestMain(m *testing.M) {
	clitest.RunIfChild()
	os.Exit(m.Run())
}

// kafkaAddr is the real Kafka of HOURGLASS_KAFKA (make test-kafka starts
// one). Without it the test skips, loudly; with HOURGLASS_KAFKA_REQUIRED=1
// it fails instead, so that CI cannot pass by skipping.
func kafkaAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("HOURGLASS_KAFKA")
	if addr == "" {
		if os.Getenv("HOURGLASS_KAFKA_REQUIRED") == "1" {
			t.Fatal("HOURGLASS_KAFKA_REQUIRED=1 but HOURGLASS_KAFKA (a Kafka bootstrap address) is not set")
		}
		t.Skip("SKIPPED: no real Kafka. hourglass bench kafka's end-to-end tests need HOURGLASS_KAFKA=host:port; run `make test-kafka`")
	}
	return addr
}

// benchKafka runs `hourglass bench kafka args... -json FILE` as a process
// and returns its exit status, its output and the JSON report.
func benchKafka(t *testing.T, args ...string) (code int, stdout, stderr string, rep kafkabench.Report) {
	t.Helper()
	bin, err := clitest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(bin, append(append([]string{"bench", "kafka"}, args...), "-json", jsonPath)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("hourglass bench kafka: %v\n%s", err, errb.String())
	}
	if b, err := os.ReadFile(jsonPath); err == nil {
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("the -json report does not parse: %v\n%s", err, b)
		}
	}
	t.Logf("hourglass bench kafka %s:\n%s", strings.Join(args, " "), out.String())
	return code, out.String(), errb.String(), rep
}

// checkClean asserts that every system of rep ran runs times with no
// message lost, duplicated or early, and that the summary has its row.
func checkClean(t *testing.T, rep kafkabench.Report, stdout string, runs int, systems ...string) {
	t.Helper()
	if len(rep.Systems) != len(systems) {
		t.Fatalf("the report has %d systems, want %v:\n%s", len(rep.Systems), systems, stdout)
	}
	for i, s := range rep.Systems {
		if s.Name != systems[i] || len(s.Runs) != runs {
			t.Errorf("system %d: %s with %d runs, want %s with %d", i, s.Name, len(s.Runs), systems[i], runs)
		}
		for j, r := range s.Runs {
			if r.Lost != 0 || r.Dup != 0 || r.Early != 0 || s.Bad != 0 {
				t.Errorf("%s run %d: lost %d, duplicated %d, early %d (strict failures %d), want 0", s.Name, j+1, r.Lost, r.Dup, r.Early, s.Bad)
			}
			if r.P50 < 0 || r.P99 < r.P50 || r.Max < r.P99 || r.Max > 30_000 {
				t.Errorf("%s run %d: lateness p50 %d / p99 %d / max %d ms is not an ordered lateness", s.Name, j+1, r.P50, r.P99, r.Max)
			}
			if r.LoadStart < 0 || r.LoadEnd < 0 {
				t.Errorf("%s run %d: load average %v-%v not read", s.Name, j+1, r.LoadStart, r.LoadEnd)
			}
		}
		if !rowStarts(stdout, s.Name+" ") {
			t.Errorf("the summary has no row for %s:\n%s", s.Name, stdout)
		}
	}
	if !rep.Passed {
		t.Errorf("the report did not pass -strict:\n%s", stdout)
	}
}

// rowStarts reports whether a line of text starts with prefix.
func rowStarts(text, prefix string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// TestBenchKafkaFloorAndHourglass runs `hourglass bench kafka` on a real
// Kafka with both floors and hourglass in both delivery modes, a few
// hundred messages each: every message arrives once and none early, the
// report has a row per system with the load average, and -strict passes.
func TestBenchKafkaFloorAndHourglass(t *testing.T) {
	addr := kafkaAddr(t)
	systems := []string{"floor", "floor-alo", "hourglass", "hourglass-alo"}
	code, stdout, stderr, rep := benchKafka(t, "-brokers", addr, "-n", "300", "-tiers", "1s,2s",
		"-produce-in", "1s", "-runs", "1", "-systems", strings.Join(systems, ","), "-strict")
	if code != 0 {
		t.Fatalf("hourglass bench kafka: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	checkClean(t, rep, stdout, 1, systems...)
	if rep.N != 300 || rep.Kill {
		t.Errorf("the report says %d messages, kill %v; want 300, false", rep.N, rep.Kill)
	}
	if !strings.Contains(stdout, "load") {
		t.Errorf("the summary has no load average:\n%s", stdout)
	}
}

// TestBenchKafkaDrill runs the drill of `hourglass bench kafka`: two
// static workers, one SIGKILLed at half and restarted with its ID. Exactly
// once holds through the kill: nothing lost, duplicated or early, and the
// report says a worker was killed and gives the lateness after it.
func TestBenchKafkaDrill(t *testing.T) {
	addr := kafkaAddr(t)
	code, stdout, stderr, rep := benchKafka(t, "-brokers", addr, "-n", "400", "-tiers", "1s",
		"-produce-in", "2s", "-runs", "1", "-systems", "hourglass", "-workers", "2", "-kill", "-static", "-strict")
	if code != 0 {
		t.Fatalf("hourglass bench kafka drill: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	checkClean(t, rep, stdout, 1, "hourglass")
	r := rep.Systems[0].Runs[0]
	if !rep.Kill || !r.Killed || r.AfterKillMax < r.AfterKillP99 || r.AfterKillMax == 0 {
		t.Errorf("drill: kill %v, killed %v, after the kill p99 %d / max %d ms; want a kill and its lateness", rep.Kill, r.Killed, r.AfterKillP99, r.AfterKillMax)
	}
	if !strings.Contains(stdout, "after-kill-p99") {
		t.Errorf("the drill's summary lacks the lateness after the kill:\n%s", stdout)
	}
}
