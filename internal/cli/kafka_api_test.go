package cli

import (
	"net"
	"strings"
	"testing"
)

// TestKafkaListenFails: an address the HTTP API cannot listen on stops
// the worker before it connects to Kafka, with exit 1 and a message
// naming --listen.
func TestKafkaListenFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := newRunner(t, nil)
	res := r.run("kafka", "--brokers", "127.0.0.1:1", "--listen", ln.Addr().String())
	if res.code != ExitFailed || !strings.Contains(res.stderr, "--listen") {
		t.Fatalf("exit %d stderr %q, want %d naming --listen", res.code, res.stderr, ExitFailed)
	}
}

// TestCancelEveryKeyAlone: --every-key takes no other target.
func TestCancelEveryKeyAlone(t *testing.T) {
	r := newRunner(t, nil)
	for _, args := range [][]string{
		{"cancel", "--every-key", "k", "k:0:1"},
		{"cancel", "--every-key", "k", "--topic", "t", "--key", "k"},
	} {
		if res := r.run(args...); res.code != ExitUsage || !strings.Contains(res.stderr, "--every-key goes alone") {
			t.Errorf("%q: exit %d stderr %q", args, res.code, res.stderr)
		}
	}
}
