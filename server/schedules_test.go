package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
)

// TestSchedulesOverHTTP: create, inspect with the next fire times, fire
// under the virtual clock, pause, resume, list and delete.
func TestSchedulesOverHTTP(t *testing.T) {
	ts := newVirtualServer(t, t.TempDir())
	var s api.Schedule
	ts.call("PUT", "/v1/schedules/report", map[string]any{"topic": "reports", "cron": "@every 10m", "key": "daily",
		"body": "make the report", "properties": map[string]string{"kind": "daily"}}, http.StatusCreated, &s)
	if s.State != api.ScheduleActive || s.Key != "daily" || s.CatchUp != "once" || s.TZ != "UTC" || len(s.Next) != 5 ||
		s.Next[0] != s.Created+600_000 || s.Next[4] != s.Created+3_000_000 || s.NextTimes[0] != s.Next[0].RFC3339() {
		t.Fatalf("created %+v", s)
	}
	var ct api.ClockTime
	ts.call("POST", "/v1/clock/advance", map[string]any{"by": "20m"}, http.StatusOK, &ct)
	if !ct.Settled {
		t.Fatalf("advance did not settle: %+v", ct)
	}
	var got api.ReceiveResponse
	ts.call("POST", "/v1/topics/reports/groups/g/receive", nil, http.StatusOK, &got)
	if len(got.Messages) != 2 {
		t.Fatalf("after 20m: %d firings of an every-10m schedule, want 2", len(got.Messages))
	}
	want := map[string]bool{}
	for _, fire := range s.Next[:2] {
		want["daily@"+fire.Time().UTC().Format("2006-01-02T15:04:05.000Z")] = true
	}
	for i, m := range got.Messages {
		if !want[m.Key] || m.Properties["hourglass-schedule"] != "report" || m.Properties["kind"] != "daily" || *m.Body != "make the report" {
			t.Fatalf("firing %d: %+v; want keys %v", i, m, want)
		}
		delete(want, m.Key)
		ts.call("POST", "/v1/topics/reports/groups/g/ack", map[string]any{"receipts": []string{m.Receipt}}, http.StatusOK, nil)
	}
	ts.call("POST", "/v1/schedules/report/pause", nil, http.StatusOK, &s)
	if s.State != api.SchedulePaused || len(s.Next) != 0 || s.LastFire == 0 || s.LastMessageID == "" {
		t.Fatalf("paused %+v", s)
	}
	ts.call("POST", "/v1/clock/advance", map[string]any{"by": "1h"}, http.StatusOK, &ct)
	ts.call("POST", "/v1/topics/reports/groups/g/receive", nil, http.StatusOK, &got)
	if len(got.Messages) != 0 {
		t.Fatalf("a paused schedule fired %d times", len(got.Messages))
	}
	ts.call("POST", "/v1/schedules/report/resume", nil, http.StatusOK, &s)
	if s.State != api.ScheduleActive || len(s.Next) != 5 {
		t.Fatalf("resumed %+v", s)
	}
	var l api.ScheduleList
	ts.call("GET", "/v1/schedules", nil, http.StatusOK, &l)
	if len(l.Schedules) != 1 || l.Schedules[0].ID != "report" {
		t.Fatalf("list %+v", l)
	}
	ts.call("DELETE", "/v1/schedules/report", nil, http.StatusOK, &s)
	if s.State != api.ScheduleDeleted {
		t.Fatalf("delete answered %+v", s)
	}
	ts.wantError(ts.do("GET", "/v1/schedules/report", nil), http.StatusNotFound, "not_found")
	ts.wantError(ts.do("POST", "/v1/schedules/report/pause", nil), http.StatusNotFound, "not_found")
}

func TestScheduleBadInput(t *testing.T) {
	ts := newVirtualServer(t, t.TempDir())
	ts.call("PUT", "/v1/topics/fifo", map[string]any{"fifo": true}, http.StatusCreated, nil)
	ts.call("PUT", "/v1/schedules/taken", map[string]any{"topic": "t", "cron": "0 9 * * *"}, http.StatusCreated, nil)
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		code       string
	}{
		{"minute 61", "/v1/schedules/a", `{"topic":"t","cron":"61 * * * *"}`, 400, "invalid_argument"},
		{"unknown zone", "/v1/schedules/a", `{"topic":"t","cron":"0 9 * * *","tz":"Europe/Atlantis"}`, 400, "invalid_argument"},
		{"never fires", "/v1/schedules/a", `{"topic":"t","cron":"0 0 31 2 *"}`, 400, "invalid_argument"},
		{"no cron", "/v1/schedules/a", `{"topic":"t"}`, 400, "invalid_argument"},
		{"no topic", "/v1/schedules/a", `{"cron":"@hourly"}`, 400, "invalid_argument"},
		{"bad catch-up", "/v1/schedules/a", `{"topic":"t","cron":"@hourly","catch_up":"maybe"}`, 400, "invalid_argument"},
		{"sub-second every", "/v1/schedules/a", `{"topic":"t","cron":"@every 500ms"}`, 400, "invalid_argument"},
		{"two bodies", "/v1/schedules/a", `{"topic":"t","cron":"@hourly","body":"x","body_base64":"eA=="}`, 400, "invalid_argument"},
		{"unknown field", "/v1/schedules/a", `{"topic":"t","cron":"@hourly","colour":"red"}`, 400, "invalid_argument"},
		{"bad id", "/v1/schedules/a%20b", `{"topic":"t","cron":"@hourly"}`, 400, "invalid_argument"},
		{"fifo topic", "/v1/schedules/a", `{"topic":"fifo","cron":"@hourly"}`, 400, "invalid_argument"},
		{"reserved property", "/v1/schedules/a", `{"topic":"t","cron":"@hourly","properties":{"hourglass-fire-time":"x"}}`, 400, "invalid_argument"},
		{"id taken", "/v1/schedules/taken", `{"topic":"u","cron":"@hourly"}`, 409, "already_exists"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts.t = t
			ts.wantError(ts.do("PUT", c.path, c.body), c.status, c.code)
		})
	}
	ts.t = t
	var l api.ScheduleList
	ts.call("GET", "/v1/schedules", nil, http.StatusOK, &l)
	if len(l.Schedules) != 1 {
		t.Fatalf("refused creates left schedules: %+v", l)
	}
}

// TestSchedulesSurviveRestart: definitions and progress come back.
func TestSchedulesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ts, closeFirst := openVirtual(t, dir)
	ts.call("PUT", "/v1/schedules/s", map[string]any{"topic": "t", "cron": "* * * * *", "tz": "Europe/Berlin"}, http.StatusCreated, nil)
	ts.call("POST", "/v1/clock/advance", map[string]any{"by": (2 * time.Minute).String()}, http.StatusOK, nil)
	var before api.Schedule
	ts.call("GET", "/v1/schedules/s", nil, http.StatusOK, &before)
	closeFirst()
	ts = newVirtualServer(t, dir)
	var after api.Schedule
	ts.call("GET", "/v1/schedules/s", nil, http.StatusOK, &after)
	if after.LastFire != before.LastFire || after.LastMessageID != before.LastMessageID || after.TZ != "Europe/Berlin" || after.LastFire == 0 {
		t.Fatalf("after a restart %+v; before %+v", after, before)
	}
}
