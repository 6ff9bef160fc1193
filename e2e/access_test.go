package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestPrincipalsEndToEnd: the binary as an operator uses it. `hourglass
// principal add` prints each secret once; `hourglass serve --credentials`
// takes them; the producer sends with --token name:secret and may not
// cancel; the operator finds and cancels; a rule added while the broker
// runs takes effect without a restart.
func TestPrincipalsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials.json")
	secretOf := func(name, rules string) string {
		t.Helper()
		out, stderr, code := runBinary(t, "principal", "--credentials", creds, "add", name, "--allow", rules)
		m := regexp.MustCompile(`\n  (\S{43})\n`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("principal add %s: exit %d %s %s", name, code, out, stderr)
		}
		return name + ":" + m[1]
	}
	producer := secretOf("checkout", "send:orders")
	operator := secretOf("oncall", "manage:orders,metrics:*")
	data, err := os.ReadFile(creds)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{producer, operator} {
		if strings.Contains(string(data), strings.SplitN(tok, ":", 2)[1]) {
			t.Fatal("a secret is in the credentials file")
		}
	}
	s := startServer(t, filepath.Join(dir, "data"), nil, "--credentials", creds)

	out, stderr, code := runBinary(t, "send", "--server", s.base, "--token", producer, "--topic", "orders", "--key", "order-1", "--delay", "1h", "close order 1")
	if code != 0 {
		t.Fatalf("send as the producer: exit %d %s %s", code, out, stderr)
	}
	_, stderr, code = runBinary(t, "cancel", "--server", s.base, "--token", producer, "--topic", "orders", "--key", "order-1")
	if code != 1 || !strings.Contains(stderr, `may not manage orders`) {
		t.Fatalf("cancel as the producer: exit %d %s, want 1 and a refusal", code, stderr)
	}
	_, stderr, code = runBinary(t, "send", "--server", s.base, "--token", operator, "--topic", "orders", "x")
	if code != 1 || !strings.Contains(stderr, `"oncall" may not send orders`) {
		t.Fatalf("send as the operator: exit %d %s", code, stderr)
	}
	if out, stderr, code = runBinary(t, "cancel", "--server", s.base, "--token", operator, "--topic", "orders", "--key", "order-1"); code != 0 {
		t.Fatalf("cancel as the operator: exit %d %s %s", code, out, stderr)
	}

	// A new principal, added while the broker runs, works within the
	// reload's poll.
	late := secretOf("late", "send:orders")
	eventually(t, 15*time.Second, "the new principal to be accepted", func() bool {
		_, _, code := runBinary(t, "send", "--server", s.base, "--token", late, "--topic", "orders", "y")
		return code == 0
	})
}
