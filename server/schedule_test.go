package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/clock"
)

// TestHTTPDeadlineAndWindowValidation: deadlines and windows that make no
// sense get a 400 that says why.
func TestHTTPDeadlineAndWindowValidation(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, withFakeClock(clk))
	now := clk.Now().UnixMilli()
	cases := []struct {
		body map[string]any
		says string
	}{
		{map[string]any{"delay": "1h", "deadline": now + 60_000}, "before the due time"},
		{map[string]any{"delay": "1h", "ttl": "1m"}, "before the due time"},
		{map[string]any{"deadline": now + 1000, "ttl": "1h"}, "at most one of deadline and ttl"},
		{map[string]any{"ttl": "soon"}, "ttl"},
		{map[string]any{"window": -5}, "negative"},
		{map[string]any{"window": int64(500 * 24 * 3600 * 1000)}, "beyond the maximum delay"},
		{map[string]any{"deadline": now + int64(500*24*3600*1000)}, "beyond the maximum delay"},
	}
	for _, tc := range cases {
		tc.body["body"] = "x"
		r := ts.do("POST", "/v1/topics/t/messages", tc.body)
		ts.wantError(r, http.StatusBadRequest, "invalid_argument")
		if !strings.Contains(r.errorMessage(), tc.says) {
			t.Errorf("%v: message %q does not say %q", tc.body, r.errorMessage(), tc.says)
		}
	}
	var rc api.Receipt
	ts.call("POST", "/v1/topics/t/messages", map[string]any{"body": "x", "delay": "1m", "ttl": "2m", "window": 10_000}, http.StatusOK, &rc)
}

// TestHTTPInspectShowsSchedulingFields: inspect tells the dedup ID,
// deadline and window a message was sent with.
func TestHTTPInspectShowsSchedulingFields(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, withFakeClock(clk))
	var rc api.Receipt
	ts.call("POST", "/v1/topics/t/messages", map[string]any{"body": "x", "delay": "1m", "ttl": "2m", "window": 500, "dedup_id": "op"}, http.StatusOK, &rc)
	var info api.MessageInfo
	ts.call("GET", "/v1/messages/"+rc.ID, nil, http.StatusOK, &info)
	if info.DedupID != "op" || int64(info.Deadline) != clk.Now().UnixMilli()+120_000 || info.Window != 500 {
		t.Fatalf("inspect %+v", info)
	}
}
