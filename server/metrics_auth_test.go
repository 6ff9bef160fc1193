package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/message"
)

// TestMetricsToken: with -metrics-token, /metrics answers 401 without
// that token (or the -auth-token) and 200 with it; the metrics token opens
// nothing else, /healthz stays open, and /v1 keeps its own rule.
func TestMetricsToken(t *testing.T) {
	for _, auth := range []string{"", "s3cret"} {
		ts := newTestServer(t, withOptions(func(c *Options) { c.MetricsToken = "scrape-me"; c.AuthToken = auth }))
		if _, err := ts.eng.Send(t.Context(), message.Message{Topic: "payroll", Body: []byte("x")}, message.When{}); err != nil {
			t.Fatal(err)
		}
		for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "scrape-me"}, {"Authorization", "Basic scrape-me"}} {
			r := ts.do("GET", "/metrics", nil, hdr...)
			ts.wantError(r, http.StatusUnauthorized, "unauthenticated")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") || strings.Contains(string(r.body), "payroll") {
				t.Fatalf("auth %q, header %v: %v %s", auth, hdr, r.header, r.body)
			}
		}
		good := []string{"scrape-me"}
		if auth != "" {
			good = append(good, auth)
		}
		for _, tok := range good {
			r := ts.do("GET", "/metrics", nil, "Authorization", "bearer "+tok)
			if r.status != http.StatusOK || !strings.Contains(string(r.body), `topic="payroll"`) {
				t.Fatalf("auth %q: /metrics with token %q: %d %.200s", auth, tok, r.status, r.body)
			}
		}
		if r := ts.do("GET", "/healthz", nil); r.status != http.StatusOK {
			t.Fatalf("/healthz without a token: %d %s", r.status, r.body)
		}
		want := http.StatusOK
		if auth != "" {
			want = http.StatusUnauthorized // the scrape token is no API token
		}
		if r := ts.do("GET", "/v1/topics", nil, "Authorization", "Bearer scrape-me"); r.status != want {
			t.Fatalf("auth %q: /v1/topics with the metrics token: %d, want %d", auth, r.status, want)
		}
	}
}
