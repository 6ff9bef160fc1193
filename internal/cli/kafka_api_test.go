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
