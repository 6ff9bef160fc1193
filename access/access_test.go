package access

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
)

func mustRules(t *testing.T, ss ...string) []Rule {
	t.Helper()
	var out []Rule
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestParseRuleRefusesWhatItCannotMean(t *testing.T) {
	for _, s := range []string{"send", "push:orders", "send:", "send:or*ders", "send:**", "SEND:orders"} {
		if _, err := ParseRule(s); err == nil {
			t.Errorf("ParseRule(%q) accepted", s)
		}
	}
	r, err := ParseRule("receive:orders/*")
	if err != nil || r.Action != Receive || r.Pattern != "orders/*" {
		t.Fatalf("ParseRule = %+v, %v", r, err)
	}
}

func TestRulesMatchExactAndPrefix(t *testing.T) {
	p := NewPrincipal("svc", mustRules(t, "send:orders", "receive:orders/billing", "manage:pay-*", "admin:group/orders/*"))
	cases := []struct {
		a    Action
		res  string
		want bool
	}{
		{Send, "orders", true},
		{Send, "orders2", false},
		{Send, "order", false},
		{Receive, "orders/billing", true},
		{Receive, "orders/shipping", false},
		{Manage, "pay-eu", true},
		{Manage, "pay", false},
		{Manage, "orders", false},
		{Admin, GroupResource("orders", "x"), true},
		{Admin, TopicResource("orders"), false},
		{Metrics, ResMetrics, false},
	}
	for _, c := range cases {
		if got := p.Allowed(c.a, c.res); got != c.want {
			t.Errorf("Allowed(%s, %q) = %v, want %v", c.a, c.res, got, c.want)
		}
	}
	err := p.Check(Send, "secret-topic")
	if !errors.Is(err, errs.ErrPermission) || !strings.Contains(err.Error(), `may not send secret-topic`) {
		t.Fatalf("Check = %v", err)
	}
	if !p.SeesTopic("orders") || p.SeesTopic("shipping") || !p.SeesTopic("pay-x") {
		t.Fatal("SeesTopic wrong")
	}
	if !p.SeesGroup("orders", "billing") || p.SeesGroup("shipping", "billing") {
		t.Fatal("SeesGroup wrong")
	}
	if p.AllowedAll(Manage) || !Anonymous.AllowedAll(Manage) {
		t.Fatal("AllowedAll wrong")
	}
}

// newFile writes a credentials file with the given principals (name ->
// rules) and returns its path and their secrets.
func newFile(t *testing.T, dir string, principals map[string][]string) (string, map[string]string) {
	t.Helper()
	path := filepath.Join(dir, "credentials.json")
	key, err := LoadOrCreateKey(DefaultKeyFile(path))
	if err != nil {
		t.Fatal(err)
	}
	f := &File{Version: fileVersion}
	secrets := map[string]string{}
	for name, rules := range principals {
		s, err := f.AddPrincipal(key, name, mustRules(t, rules...))
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = s
	}
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
	return path, secrets
}

func TestSecretsAreNeverStoredAndVerify(t *testing.T) {
	dir := t.TempDir()
	path, secrets := newFile(t, dir, map[string][]string{"billing": {"send:orders"}, "ops": {"admin:*"}})
	data, _ := os.ReadFile(path)
	for name, s := range secrets {
		if len(s) < 40 || bytes.Contains(data, []byte(s)) {
			t.Fatalf("secret of %s is in the credentials file, or short: %q", name, s)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v", st.Mode().Perm())
	}
	s, err := Open(Options{File: path, AuthToken: "tok", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Bearer("billing:" + secrets["billing"])
	if err != nil || p.Name != "billing" {
		t.Fatalf("Bearer = %v, %v", p, err)
	}
	for _, bad := range []string{"billing:" + secrets["ops"], "ops:" + secrets["billing"], "nobody:" + secrets["billing"], secrets["billing"], "billing:", "tok2"} {
		if _, err := s.Bearer(bad); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("Bearer(%q) = %v, want ErrBadCredentials", bad, err)
		}
	}
	if p, err := s.Bearer("tok"); err != nil || p.Name != TokenName || !p.AllowedAll(Admin) {
		t.Fatalf("auth token = %v, %v", p, err)
	}
	// The signing secret is the printed one.
	p, secret, ok := s.SigningSecret("ops")
	if !ok || p.Name != "ops" || secret != secrets["ops"] {
		t.Fatal("SigningSecret of a file principal is not its secret")
	}
	if p, secret, ok := s.SigningSecret("any-key"); !ok || p.Name != TokenName || secret != "tok" {
		t.Fatal("an unknown access key does not fall back to the auth token")
	}
	// Without the key file, bearer secrets still work, signatures do not.
	os.Remove(DefaultKeyFile(path))
	s2, err := Open(Options{File: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s2.SigningSecret("ops"); ok {
		t.Fatal("signing secret without a key file")
	}
	if _, err := s2.Bearer("ops:" + secrets["ops"]); err != nil {
		t.Fatal(err)
	}
}

func TestFromRequest(t *testing.T) {
	dir := t.TempDir()
	path, secrets := newFile(t, dir, map[string][]string{"billing": {"send:orders"}})
	s, err := Open(Options{File: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	if _, err := s.FromRequest(r); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("no header: %v", err)
	}
	r.SetBasicAuth("billing", secrets["billing"])
	if p, err := s.FromRequest(r); err != nil || p.Name != "billing" {
		t.Fatalf("basic: %v %v", p, err)
	}
	r.Header.Set("Authorization", "bearer billing:"+secrets["billing"])
	if p, err := s.FromRequest(r); err != nil || p.Name != "billing" {
		t.Fatalf("bearer: %v %v", p, err)
	}
	r.Header.Set("Authorization", "Digest x")
	if _, err := s.FromRequest(r); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("digest: %v", err)
	}
	if s.Open() || s.MetricsOpen() {
		t.Fatal("a store with a file is open")
	}
	open, _ := Open(Options{AuthToken: "x"})
	if open.Open() || !open.MetricsOpen() {
		t.Fatal("-auth-token alone: /v1 closed, /metrics open")
	}
	none, _ := Open(Options{})
	if p, err := none.FromRequest(r); err != nil || p != Anonymous {
		t.Fatal("an open store is not anonymous")
	}
}

// syncBuffer is a log sink the watcher writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReloadKeepsPreviousRulesOnABadFile(t *testing.T) {
	dir := t.TempDir()
	path, secrets := newFile(t, dir, map[string][]string{"billing": {"send:orders"}})
	var logs syncBuffer
	s, err := Open(Options{File: path, Poll: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Watch(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// A bad rule: refused, logged, the old rules stay.
	f, _ := ReadFile(path)
	good := *f
	f.Principals = append([]FileEntry(nil), f.Principals...)
	f.Principals[0].Allow = []string{"send:or*ders"}
	data, _ := json.Marshal(f)
	if err := WriteFileAtomic(path, data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refusal in the log", func() bool { return strings.Contains(logs.String(), "credentials reload failed") })
	if !strings.Contains(logs.String(), "may only end a pattern") {
		t.Fatalf("the log does not say why: %s", logs.String())
	}
	p, err := s.Bearer("billing:" + secrets["billing"])
	if err != nil || !p.Allowed(Send, "orders") {
		t.Fatal("the previous rules did not stay")
	}
	// A good change: logged, in force.
	good.Principals[0].Allow = []string{"send:invoices"}
	if err := good.Write(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool {
		p, err := s.Bearer("billing:" + secrets["billing"])
		return err == nil && p.Allowed(Send, "invoices") && !p.Allowed(Send, "orders")
	})
	waitFor(t, "the reload in the log", func() bool { return strings.Contains(logs.String(), "credentials reloaded") })
	if strings.Contains(logs.String(), secrets["billing"]) {
		t.Fatal("a secret is in the log")
	}
}

func TestParseFileRefusesBadFiles(t *testing.T) {
	for name, data := range map[string]string{
		"not json":      `{`,
		"version":       `{"version": 2, "principals": []}`,
		"unknown field": `{"version": 1, "principals": [], "principal": []}`,
		"reserved":      `{"version": 1, "principals": [{"name": "auth-token", "salt": "", "secret_hash": "", "allow": []}]}`,
		"bad salt":      `{"version": 1, "principals": [{"name": "a", "salt": "xx", "secret_hash": "", "allow": []}]}`,
	} {
		if _, err := ParseFile([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	f := &File{Version: 1}
	key := make([]byte, keySize)
	if _, err := f.AddPrincipal(key, "a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddPrincipal(key, "a", nil); err == nil {
		t.Fatal("a second principal a was added")
	}
	f.Principals = append(f.Principals, f.Principals[0])
	data, _ := json.Marshal(f)
	if _, err := ParseFile(data); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a duplicate principal: %v", err)
	}
	if !f.RemovePrincipal("a") || f.RemovePrincipal("zz") {
		t.Fatal("RemovePrincipal")
	}
}

func TestAuditRecords(t *testing.T) {
	var buf bytes.Buffer
	a := NewAudit(slog.New(slog.NewJSONHandler(&buf, nil)).With("logger", AuditLogName))
	a.Record(context.Background(), "http", "ops", Admin, TopicResource("orders"), ResultOK, "")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"logger": "audit", "principal": "ops", "action": "admin", "resource": "topic/orders", "result": "ok", "surface": "http"} {
		if rec[k] != v {
			t.Errorf("%s = %v, want %s", k, rec[k], v)
		}
	}
	var none *Audit
	none.Record(context.Background(), "http", "", Send, "x", ResultDenied, "")
}

// TestLooseKeyFileWarns: a key file others may read is worth every secret,
// so loading it says so.
func TestLooseKeyFileWarns(t *testing.T) {
	path, _ := newFile(t, t.TempDir(), map[string][]string{"a": {"send:x"}})
	var logs bytes.Buffer
	if _, err := Open(Options{File: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "chmod 600") {
		t.Fatalf("a 0600 key file warned: %s", logs.String())
	}
	if err := os.Chmod(DefaultKeyFile(path), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{File: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "chmod 600") {
		t.Fatalf("a 0644 key file did not warn: %s", logs.String())
	}
}

// BenchmarkBearer: the cost of checking a file principal's bearer secret
// (one HMAC-SHA256) against the -auth-token's constant-time compare.
func BenchmarkBearer(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "credentials.json")
	key, _ := LoadOrCreateKey(DefaultKeyFile(path))
	f := &File{Version: fileVersion}
	secret, _ := f.AddPrincipal(key, "svc", []Rule{{Send, "orders"}})
	if err := f.Write(path); err != nil {
		b.Fatal(err)
	}
	s, err := Open(Options{File: path, AuthToken: "a-token-of-forty-three-bytes-0123456789abc", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	for name, cred := range map[string]string{"token": "a-token-of-forty-three-bytes-0123456789abc", "principal": "svc:" + secret} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if _, err := s.Bearer(cred); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
