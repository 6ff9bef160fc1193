package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// TestScheduleFiringsRoute: the latest firings with their messages and
// states, times in the schedule's zone; bad n, an unknown parameter and an
// unknown schedule are refused.
func TestScheduleFiringsRoute(t *testing.T) {
	ts := newVirtualServer(t, t.TempDir())
	var s api.Schedule
	ts.call("PUT", "/v1/schedules/report", map[string]any{"topic": "reports", "cron": "@every 10m", "tz": "Asia/Tokyo"}, http.StatusCreated, &s)
	if len(s.NextLocal) != 5 || !strings.HasSuffix(s.NextLocal[0], "+09:00") {
		t.Fatalf("next_local %v", s.NextLocal)
	}
	ts.call("POST", "/v1/clock/advance", map[string]any{"by": "25m"}, http.StatusOK, nil)
	var fs api.ScheduleFirings
	ts.call("GET", "/v1/schedules/report/firings?n=3", nil, http.StatusOK, &fs)
	if fs.TZ != "Asia/Tokyo" || len(fs.Firings) != 2 {
		t.Fatalf("firings %+v", fs)
	}
	for i, f := range fs.Firings {
		if !f.Sent || f.State != api.StateVisible || f.MessageID == "" || f.Ahead || !strings.HasSuffix(f.FireLocal, "+09:00") ||
			f.Fire != s.Next[1-i] || !strings.HasPrefix(f.Key, "report@") {
			t.Fatalf("firing %d: %+v (next were %v)", i, f, s.Next)
		}
	}
	for _, q := range []string{"?n=0", "?n=51", "?n=x", "?m=3"} {
		ts.wantError(ts.do("GET", "/v1/schedules/report/firings"+q, nil), http.StatusBadRequest, "invalid_argument")
	}
	ts.wantError(ts.do("GET", "/v1/schedules/nope/firings", nil), http.StatusNotFound, "not_found")
}
