package tlsreload

import (
	"crypto/x509"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/access/accesstest"
)

func commonName(t *testing.T, r *Reloader) string {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

// TestReloadKeepsTheOldPairUntilTheNewOneLoads: a key that does not match
// its certificate (a rotation half done) or a damaged file keeps the old
// pair in service and is logged; the whole new pair is then served.
func TestReloadKeepsTheOldPairUntilTheNewOneLoads(t *testing.T) {
	dir := t.TempDir()
	ca := accesstest.NewCA(t, dir)
	cert, key, _ := ca.Issue(t, dir, "s", "one", true)
	var logs strings.Builder
	r, err := New(cert, key, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := commonName(t, r); got != "one" {
		t.Fatalf("serves %q", got)
	}
	// A new key beside the old certificate.
	_, newKey, _ := ca.Issue(t, t.TempDir(), "s", "two", true)
	data, _ := os.ReadFile(newKey)
	if err := os.WriteFile(key, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r.Reload()
	if got := commonName(t, r); got != "one" || !strings.Contains(logs.String(), "previous certificate stays in service") {
		t.Fatalf("after a half rotation: serves %q, log %q", got, logs.String())
	}
	if err := os.WriteFile(cert, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.Reload()
	if got := commonName(t, r); got != "one" {
		t.Fatalf("after a damaged certificate: serves %q", got)
	}
	ca.Issue(t, dir, "s", "three", true)
	r.Reload()
	if got := commonName(t, r); got != "three" || !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Fatalf("after the whole pair: serves %q, log %q", got, logs.String())
	}
	if _, err := New(cert, dir+"/missing.pem", nil); err == nil {
		t.Fatal("New with a missing key succeeded")
	}
}
