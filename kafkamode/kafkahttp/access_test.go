package kafkahttp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/access/accesstest"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestAccessRules: Kafka mode's API checks the principals' rules before
// it reaches Kafka (whose address here answers nothing): refusals are 403
// naming the action and resource, missing or wrong credentials 401, and
// every refusal is in the audit trail, without the secret.
func TestAccessRules(t *testing.T) {
	path, secrets := accesstest.Write(t, t.TempDir(), map[string][]string{
		"producer": {"send:orders"},
		"operator": {"manage:*", "metrics:forecast"},
		"viewer":   {"manage:orders"},
	})
	var audit bytes.Buffer
	cfg := kafkamode.DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.DLQTopic, cfg.StateTopic = cfg.DelayTopic+".dlq", cfg.DelayTopic+".state"
	h, err := New(cfg, &stubForecaster{}, Options{Access: accesstest.Store(t, path, ""),
		Audit: access.NewAudit(slog.New(slog.NewJSONHandler(&audit, nil))),
		Now:   func() time.Time { return time.UnixMilli(1_800_000_000_000) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	bearer := func(name string) []string { return []string{"Authorization", "Bearer " + name + ":" + secrets[name]} }
	cases := []struct {
		what, method, path string
		hdr                []string
		status             int
		says               string
	}{
		{"wrong action", "GET", "/v1/forecast", bearer("producer"), 403, `may not metrics forecast`},
		{"allowed elsewhere", "POST", "/v1/topics/invoices/messages", bearer("producer"), 403, `may not send invoices`},
		{"by ID needs every topic", "DELETE", "/v1/messages/k:0:5", bearer("viewer"), 403, `may not manage every topic`},
		{"by key alone needs every topic", "DELETE", "/v1/keys/order-1", bearer("viewer"), 403, `may not manage every topic`},
		{"no credential", "GET", "/v1/forecast", nil, 401, "credentials are required"},
		{"wrong secret", "GET", "/v1/forecast", []string{"Authorization", "Bearer operator:" + secrets["producer"]}, 401, "do not verify"},
		{"unknown path", "GET", "/v1/nothing", nil, 401, "credentials are required"},
		{"allowed", "GET", "/v1/forecast", bearer("operator"), 200, ""},
	}
	for _, c := range cases {
		status, out := do(t, h, c.method, c.path, "", c.hdr...)
		if status != c.status {
			t.Errorf("%s: %s %s = %d %v, want %d", c.what, c.method, c.path, status, out, c.status)
			continue
		}
		if c.status == 200 {
			continue
		}
		code, msg := errorOf(t, out)
		want := errs.Unauthenticated
		if c.status == 403 {
			want = errs.PermissionDenied
		}
		if code != string(want) || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %q, want %s saying %q", c.what, code, msg, want, c.says)
		}
	}
	trail := audit.String()
	if !strings.Contains(trail, `"principal":"viewer"`) || !strings.Contains(trail, `"result":"denied"`) {
		t.Fatalf("refusals are not in the audit trail: %s", trail)
	}
	for _, s := range secrets {
		if strings.Contains(trail, s) {
			t.Fatal("a secret is in the audit trail")
		}
	}
}
