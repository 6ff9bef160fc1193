package cli

import (
	"strings"
	"testing"
)

// TestBenchKafkaHelp: `hourglass bench kafka --help` is the Kafka
// benchmark's own help (not hourglass bench's), exit 0, naming the
// systems and the drill's flags, and leaving out the internal ones.
func TestBenchKafkaHelp(t *testing.T) {
	r := newRunner(t, nil).run("bench", "kafka", "--help")
	if r.code != ExitOK {
		t.Fatalf("bench kafka --help: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"usage: hourglass bench kafka", "-brokers", "-systems", "floor", "hourglass-alo",
		"-kill", "-static", "-no-restart", "-session-timeout", "-strict", "-json", "load average"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("bench kafka --help lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, internal := range []string{"-role", "-prefix"} {
		if strings.Contains(r.stderr, internal+" ") {
			t.Errorf("bench kafka --help shows the internal flag %s:\n%s", internal, r.stderr)
		}
	}
}

// TestBenchKafkaRefusesBadFlags: each bad flag or combination is a usage
// error (exit 2) that says what is wrong, before any connection to Kafka
// (the brokers named do not exist).
func TestBenchKafkaRefusesBadFlags(t *testing.T) {
	const b = "127.0.0.1:1"
	cases := []struct {
		args []string
		want string
	}{
		{nil, "-brokers is required"},
		{[]string{"-brokers", b, "-n", "1"}, "-n 1"},
		{[]string{"-brokers", b, "-tiers", "1s,0s"}, `"0s" is not a positive duration`},
		{[]string{"-brokers", b, "-tiers", "soon"}, `"soon" is not a positive duration`},
		{[]string{"-brokers", b, "-systems", "floor,kafka"}, `unknown system "kafka"`},
		{[]string{"-brokers", b, "-systems", "floor,floor"}, "floor named twice"},
		{[]string{"-brokers", b, "-systems", "schemec"}, `unknown system "schemec"`},
		{[]string{"-brokers", b, "-runs", "0"}, "-runs 0"},
		{[]string{"-brokers", b, "-workers", "0"}, "-workers 0"},
		{[]string{"-brokers", b, "-produce-in", "0s"}, "-produce-in 0s"},
		{[]string{"-brokers", b, "-body", "4"}, "-body 4"},
		{[]string{"-brokers", b, "-no-restart"}, "-no-restart goes with -kill"},
		{[]string{"-brokers", b, "-kill", "-no-restart"}, "-workers 2 or more"},
		{[]string{"-brokers", b, "-delay-topic", "d", "-kill", "-systems", "hourglass"}, "-delay-topic"},
		{[]string{"-brokers", b, "-delay-topic", "d"}, "-delay-topic"},
		{[]string{"-brokers", b, "-hourglass", "/nonexistent/hourglass"}, "not a file"},
		{[]string{"-brokers", b, "-session-timeout", "0s"}, "-session-timeout"},
		{[]string{"-brokers", b, "stray"}, `unexpected argument "stray"`},
		{[]string{"-brokers", b, "-role", "forwarder", "-prefix", "p"}, "internal"},
		{[]string{"-brokers", b, "-n", "many"}, "invalid value"},
	}
	for _, tc := range cases {
		r := newRunner(t, nil).run(append([]string{"bench", "kafka"}, tc.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("bench kafka %v: exit %d, stdout %q, stderr %q; want exit %d naming %q",
				tc.args, r.code, r.stdout, r.stderr, ExitUsage, tc.want)
		}
	}
}

// TestBenchKafkaBrokersFromEnv: $HOURGLASS_KAFKA_BROKERS stands in for
// -brokers, as it does for hourglass kafka.
func TestBenchKafkaBrokersFromEnv(t *testing.T) {
	r := newRunner(t, map[string]string{"HOURGLASS_KAFKA_BROKERS": "127.0.0.1:1"}).run("bench", "kafka", "-n", "1")
	if r.code != ExitUsage || strings.Contains(r.stderr, "-brokers is required") || !strings.Contains(r.stderr, "-n 1") {
		t.Fatalf("bench kafka with $HOURGLASS_KAFKA_BROKERS: exit %d, stderr %q", r.code, r.stderr)
	}
}
