package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/console"
)

// TestConsoleFiles: the console is served under /ui/ without the token
// (its files hold no data), with a self-only Content-Security-Policy,
// while the API it calls still needs the token.
func TestConsoleFiles(t *testing.T) {
	ts := newTestServer(t, withOptions(func(c *Options) { c.AuthToken = "s3cret" }))
	for path, want := range map[string]string{
		"/ui/":            "<title>hourglass console</title>",
		"/ui/app.js":      "sessionStorage",
		"/ui/app.css":     "prefers-color-scheme: dark",
		"/ui/favicon.svg": "<svg",
	} {
		r := ts.do("GET", path, nil)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), want) {
			t.Fatalf("GET %s: %d, body lacks %q", path, r.status, want)
		}
		if csp := r.header.Get("Content-Security-Policy"); csp != console.CSP || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
	// The files reference nothing outside the broker.
	for _, f := range []string{"/ui/", "/ui/app.js", "/ui/app.css"} {
		body := string(ts.do("GET", f, nil).body)
		for _, ext := range []string{"http://", "https://", "//cdn", "@import"} {
			if i := strings.Index(body, ext); i >= 0 && !strings.Contains(body[i:min(len(body), i+40)], "www.w3.org/2000/svg") {
				t.Errorf("%s refers outside the broker: %q", f, body[i:min(len(body), i+60)])
			}
		}
	}
	r := ts.do("GET", "/ui/nope.js", nil)
	if r.status != http.StatusNotFound {
		t.Errorf("missing file: %d", r.status)
	}
	r = ts.do("GET", "/v1/stats", nil)
	ts.wantError(r, http.StatusUnauthorized, "unauthenticated")
	r = ts.do("POST", "/ui/", "{}")
	if r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d", r.status)
	}
}

// TestConsoleRedirect: /ui leads to /ui/.
func TestConsoleRedirect(t *testing.T) {
	ts := newTestServer(t)
	c := ts.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(ts.srv.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestWritesAreCSRFSafe: a broker without a token still refuses a write a
// browser sends from another site, and a body declared as a form or text
// (which browsers send cross-site without a preflight); JSON from a
// same-origin page or a non-browser client passes.
func TestWritesAreCSRFSafe(t *testing.T) {
	ts := newTestServer(t)
	body := `{"body":"x","delay":"1h"}`
	r := ts.do("POST", "/v1/topics/t/messages", body, "Sec-Fetch-Site", "cross-site")
	ts.wantError(r, http.StatusUnauthorized, "unauthenticated")
	r = ts.do("POST", "/v1/topics/t/messages", body, "Origin", "http://evil.example")
	ts.wantError(r, http.StatusUnauthorized, "unauthenticated")
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		// From a browser (same origin, or no Sec-Fetch-Site but an
		// Origin): only JSON.
		r = ts.do("POST", "/v1/topics/t/messages", body, "Content-Type", ct, "Sec-Fetch-Site", "same-origin")
		ts.wantError(r, http.StatusBadRequest, "invalid_argument")
		r = ts.do("POST", "/v1/topics/t/messages", body, "Content-Type", ct, "Origin", ts.srv.URL)
		ts.wantError(r, http.StatusBadRequest, "invalid_argument")
	}
	// curl -d labels a JSON body as a form: a tool's write passes, parsed
	// as JSON all the same.
	r = ts.do("POST", "/v1/topics/t/messages", body, "Content-Type", "application/x-www-form-urlencoded")
	if r.status != http.StatusOK {
		t.Fatalf("curl -d style write: %d %s", r.status, r.body)
	}
	r = ts.do("POST", "/v1/topics/t/messages", "body=x", "Content-Type", "application/x-www-form-urlencoded")
	ts.wantError(r, http.StatusBadRequest, "invalid_argument")
	ts.call("POST", "/v1/topics/t/messages", body, http.StatusOK, nil)
	r = ts.do("POST", "/v1/topics/t/messages", body, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json; charset=utf-8")
	if r.status != http.StatusOK {
		t.Fatalf("same-origin JSON: %d %s", r.status, r.body)
	}
	// Reads are never refused for their origin.
	ts.call("GET", "/v1/stats", nil, http.StatusOK, nil)
	if r := ts.do("GET", "/v1/stats", nil, "Sec-Fetch-Site", "cross-site"); r.status != http.StatusOK {
		t.Fatalf("cross-site read: %d", r.status)
	}
}
