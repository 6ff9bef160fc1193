package e2e_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBadInputOverTheWire checks the contract's error answers on the real
// binary, configured by flags and the environment: auto-create off, a
// 1 KiB body limit, a 80 KiB request limit, a 1 h maximum delay, and an
// auth token from HOURGLASS_AUTH_TOKEN.
func TestBadInputOverTheWire(t *testing.T) {
	s := startServer(t, "", []string{"HOURGLASS_AUTH_TOKEN=tok-123"},
		"--auto-create-topics=false", "--max-body-bytes", "1KiB", "--max-request-bytes", "80KiB", "--max-delay", "1h", "--delay-levels", "1s,5s,1m", "--max-batch", "5")
	s.call("PUT", "/v1/topics/t", nil, http.StatusCreated, nil)
	var r receipt
	s.call("POST", "/v1/topics/t/messages", map[string]any{"body": "x", "delay": "10m"}, http.StatusOK, &r)
	s.call("PUT", "/v1/topics/t/groups/g", nil, http.StatusCreated, nil)

	cases := []struct {
		name, method, path string
		body               any
		header             []string
		status             int
		code               string
	}{
		{"bad JSON", "POST", "/v1/topics/t/messages", `{"body":"x"`, nil, 400, "invalid_argument"},
		{"unknown field", "POST", "/v1/topics/t/messages", `{"body":"x","colour":"red"}`, nil, 400, "invalid_argument"},
		{"unknown topic, auto-create off", "POST", "/v1/topics/nope/messages", `{"body":"x"}`, nil, 404, "not_found"},
		{"body too large", "POST", "/v1/topics/t/messages", map[string]any{"body": strings.Repeat("b", 1025)}, nil, 413, "too_large"},
		{"request too large", "POST", "/v1/topics/t/messages", map[string]any{"body": strings.Repeat("b", 90<<10)}, nil, 413, "too_large"},
		{"batch too large", "POST", "/v1/topics/t/batch", `{"messages":[{},{},{},{},{},{}]}`, nil, 413, "too_large"},
		{"delay beyond max", "POST", "/v1/topics/t/messages", `{"delay":"2h"}`, nil, 400, "invalid_argument"},
		{"at beyond max", "POST", "/v1/topics/t/messages", `{"at":` + strconv.FormatInt(time.Now().Add(3*time.Hour).UnixMilli(), 10) + `}`, nil, 400, "invalid_argument"},
		{"reschedule beyond max", "POST", "/v1/messages/" + r.ID + "/reschedule", `{"delay":"61m"}`, nil, 400, "invalid_argument"},
		{"unknown receipt", "POST", "/v1/topics/t/groups/g/ack", `{"receipts":["` + fakeReceipt(t, s) + `"]}`, nil, 404, "not_found"},
		{"bad id", "GET", "/v1/messages/not-an-id", nil, nil, 400, "invalid_argument"},
		{"unknown id", "GET", "/v1/messages/" + strings.Repeat("0", 15) + "1" + strings.Repeat("0", 16), nil, nil, 404, "not_found"},
		{"missing token", "GET", "/v1/topics", nil, []string{"Authorization", ""}, 401, "unauthenticated"},
		{"wrong token", "GET", "/v1/topics", nil, []string{"Authorization", "Bearer nope"}, 401, "unauthenticated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.t = t
			wantError(t, s.do(c.method, c.path, c.body, c.header...), c.status, c.code)
		})
	}
	s.t = t
	// Open endpoints need no token.
	for _, p := range []string{"/healthz", "/metrics"} {
		if r := s.do("GET", p, nil, "Authorization", ""); r.status != http.StatusOK {
			t.Fatalf("GET %s without a token: %d %s", p, r.status, r.body)
		}
	}
}

// fakeReceipt returns a receipt the server issued and then forgot: it
// leases the one message of t/g and acks it.
func fakeReceipt(t *testing.T, s *server) string {
	t.Helper()
	s.call("POST", "/v1/topics/t/messages", map[string]any{"body": "r"}, http.StatusOK, nil)
	var got []received
	eventually(t, 10*time.Second, "a message to lease", func() bool {
		got = s.receive("t", "g", map[string]any{"wait": "1s"})
		return len(got) > 0
	})
	s.ack("t", "g", got...)
	return got[0].Receipt
}
