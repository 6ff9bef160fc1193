package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKafkaUsageErrors: the kafka command refuses bad command lines with
// exit 2 and a message that says what is wrong, before connecting to
// anything (the brokers named are not reachable).
func TestKafkaUsageErrors(t *testing.T) {
	r := newRunner(t, nil)
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"kafka"}, "--brokers is required"},
		{[]string{"kafka", "--brokers", "nohostport"}, "not host:port"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--partitions", "0"}, "--partitions 0"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--replication", "0"}, "--replication 0"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--delay-topic", "a b"}, "delay topic"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--dlq-topic", "hourglass.delay"}, "must differ from the delay topic"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--log-level", "loud"}, "--log-level"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "extra"}, "unexpected argument"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--near-window", "2s"}, "near window"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--near-window", "-1m"}, "near window"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--static-membership"}, "--static-membership needs --worker-id"},
		{[]string{"kafka", "--brokers", "127.0.0.1:1", "--worker-id", "w1\n"}, "worker ID"},
	}
	for _, tc := range cases {
		res := r.run(tc.args...)
		if res.code != ExitUsage || !strings.Contains(res.stderr, tc.msg) {
			t.Errorf("%q: exit %d stderr %q, want %d and %q", tc.args, res.code, res.stderr, ExitUsage, tc.msg)
		}
	}
	// The brokers may also come from the environment.
	env := newRunner(t, map[string]string{"HOURGLASS_KAFKA_BROKERS": "nohostport"})
	if res := env.run("kafka"); res.code != ExitUsage || !strings.Contains(res.stderr, "not host:port") {
		t.Errorf("brokers from the environment: exit %d stderr %q", res.code, res.stderr)
	}
}

// TestKafkaSpillDirNotWritable: a --spill-dir that cannot take files stops
// the worker at start, before it connects, with an error naming it.
func TestKafkaSpillDirNotWritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res := newRunner(t, nil).run("kafka", "--brokers", "127.0.0.1:1", "--spill-dir", file)
	if res.code != ExitFailed || !strings.Contains(res.stderr, "not writable") || !strings.Contains(res.stderr, file) {
		t.Errorf("exit %d stderr %q, want %d and a not-writable error naming the directory", res.code, res.stderr, ExitFailed)
	}
}
