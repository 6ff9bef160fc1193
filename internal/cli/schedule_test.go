package cli

import (
	"strings"
	"testing"
)

// TestScheduleAndClockCommands: what the schedule and clock commands send
// and print, and their usage errors, which send nothing.
func TestScheduleAndClockCommands(t *testing.T) {
	sched := `{"id":"report","topic":"reports","key":"report","tag":"","body_bytes":4,"cron":"0 9 * * *","tz":"Europe/Berlin",` +
		`"catch_up":"once","state":"active","created":1900000000000,"last_fire":0,"last_message_id":"",` +
		`"next":[1900000600000],"next_times":["x"]}`
	f := newFakeServer(t, map[string]fakeResponse{
		"PUT /v1/schedules/report":        {201, sched},
		"POST /v1/clock/advance":          okJSON(`{"mode":"virtual","now":1900001800000,"now_time":"2030-03-17T17:56:40.000Z","settled":true}`),
		"POST /v1/schedules/report/pause": okJSON(strings.Replace(sched, `"active"`, `"paused"`, 1)),
	})
	r := newRunner(t, f.env())
	res := r.run("schedule", "create", "report", "--topic", "reports", "--cron", "0 9 * * *", "--tz", "Europe/Berlin", "--prop", "a=b", "make")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "schedule report (active)") || !strings.Contains(res.stdout, "0 9 * * * in Europe/Berlin") ||
		!strings.Contains(res.stdout, "next:         2030-03-17 18:56:40.000 CET (2030-03-17T17:56:40.000Z, in 10m0s)") {
		t.Fatalf("create printed:\n%s", res.stdout)
	}
	res = r.run("schedule", "pause", "report")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "(paused)") {
		t.Fatalf("pause printed:\n%s", res.stdout)
	}
	r.run("clock", "advance", "30m").wantCode(t, ExitOK)
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	body := reqs[0].Body
	if body["topic"] != "reports" || body["cron"] != "0 9 * * *" || body["tz"] != "Europe/Berlin" || body["body"] != "make" ||
		body["properties"].(map[string]any)["a"] != "b" {
		t.Fatalf("create sent %v", body)
	}
	if reqs[2].Body["by"] != "30m0s" {
		t.Fatalf("clock advance sent %v", reqs[2].Body)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"schedule"}, "give a subcommand"},
		{[]string{"schedule", "create", "x", "--cron", "@hourly"}, "needs --topic and --cron"},
		{[]string{"schedule", "get"}, "one schedule ID"},
		{[]string{"schedule", "list", "x"}, "takes no argument"},
		{[]string{"schedule", "rename", "x"}, "unknown subcommand"},
		{[]string{"clock", "advance", "--", "-5m"}, "never runs backwards"},
		{[]string{"clock", "advance"}, "one duration"},
		{[]string{"clock", "advance", "1m", "--to", "2030-01-01T00:00:00Z"}, "one duration"},
		{[]string{"clock", "now", "x"}, "takes no argument"},
	} {
		res := r.run(tc.args...)
		if res.code != ExitUsage || !strings.Contains(res.stderr, tc.msg) {
			t.Errorf("%q: exit %d stderr %q, want %d and %q", tc.args, res.code, res.stderr, ExitUsage, tc.msg)
		}
	}
	if n := len(f.requests()); n != 3 {
		t.Errorf("%d requests after bad command lines, want still 3", n)
	}
}
