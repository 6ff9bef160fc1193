package cli

import (
	"net"
	"os"
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

// TestKafkaAccessFlags: the worker's HTTP API takes a credentials file and
// TLS files; a file it cannot use stops the worker before it connects to
// Kafka, with a message that names it.
func TestKafkaAccessFlags(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/creds.json"
	if err := os.WriteFile(bad, []byte(`{"version": 1, "principals": [{"name": "x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, nil)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--credentials", bad}, "credentials file"},
		{[]string{"--credentials", dir + "/missing.json"}, "credentials file"},
		{[]string{"--tls-cert-file", dir + "/cert.pem"}, "--tls-cert-file and --tls-key-file go together"},
		{[]string{"--tls-cert-file", dir + "/cert.pem", "--tls-key-file", dir + "/key.pem"}, "TLS"},
	} {
		args := append([]string{"kafka", "--brokers", "127.0.0.1:1", "--listen", "127.0.0.1:0"}, c.args...)
		if res := r.run(args...); res.code != ExitFailed || !strings.Contains(res.stderr, c.says) {
			t.Errorf("%q: exit %d stderr %q, want %d naming %q", c.args, res.code, res.stderr, ExitFailed, c.says)
		}
	}
}
