package cli

import (
	"strings"
	"testing"
)

// TestBenchKafkaSaysWhereItWent: `hourglass bench kafka`, a developer's
// benchmark no longer linked into the binary, is a usage error that names
// the command that runs it now, not a load test started with "kafka" as a
// stray argument.
func TestBenchKafkaSaysWhereItWent(t *testing.T) {
	r := newRunner(t, nil).run("bench", "kafka", "-brokers", "127.0.0.1:1")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "./internal/kafkabench") || r.stdout != "" {
		t.Fatalf("bench kafka: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
