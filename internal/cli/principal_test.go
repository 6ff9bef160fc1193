package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/access"
)

// TestPrincipalAddPrintsTheSecretOnce: the secret is printed by add, works
// against the file, and is in neither the file, the key file's name nor
// the listing.
func TestPrincipalAddPrintsTheSecretOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "creds.json")
	r := newRunner(t, map[string]string{"HOURGLASS_CREDENTIALS": file})
	res := r.run("principal", "add", "billing", "--allow", "send:orders,receive:orders/billing")
	if res.code != ExitOK {
		t.Fatalf("add: %d %s", res.code, res.stderr)
	}
	m := regexp.MustCompile(`\n  (\S{43})\n`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("no secret printed: %s", res.stdout)
	}
	secret := m[1]
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Fatal("the secret is in the credentials file")
	}
	list := r.run("principal", "list")
	if list.code != ExitOK || strings.Contains(list.stdout, secret) || !strings.Contains(list.stdout, "send:orders receive:orders/billing") {
		t.Fatalf("list: %+v", list)
	}
	s, err := access.Open(access.Options{File: file, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Bearer("billing:" + secret)
	if err != nil || !p.Allowed(access.Receive, "orders/billing") || p.Allowed(access.Manage, "orders") {
		t.Fatalf("the printed secret: %v %v", p, err)
	}
	if res := r.run("principal", "add", "billing", "--allow", "send:x"); res.code != ExitFailed || !strings.Contains(res.stderr, "exists already") {
		t.Fatalf("a second add: %+v", res)
	}
	if res := r.run("principal", "add", "x", "--allow", "send:a*b"); res.code != ExitUsage {
		t.Fatalf("a bad rule: %+v", res)
	}
	if res := r.run("principal", "remove", "billing"); res.code != ExitOK {
		t.Fatalf("remove: %+v", res)
	}
	if _, err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bearer("billing:" + secret); err == nil {
		t.Fatal("a removed principal still signs in")
	}
}
