package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/hourglasstest"
)

// TestScheduleGetOnARealBroker: the frictions of issue 30 item 7 with a
// real broker on virtual time. schedule get shows the next fire times in
// the schedule's zone (and UTC), labels each line, calls a firing sent
// ahead "sent ahead" rather than a last fire in the future, never shows a
// last fire later than the next after a pause and resume, and lists the
// latest firings with what became of them.
func TestScheduleGetOnARealBroker(t *testing.T) {
	srv := hourglasstest.NewServer(t)
	ctx := context.Background()
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": srv.URL})
	r.run("schedule", "create", "tick", "--topic", "ticks", "--cron", "* * * * *", "--tz", "Europe/Berlin", "x").wantCode(t, ExitOK)
	// Just inside the lead of the next minute: its firing is sent ahead.
	now := srv.Now()
	next := now.Truncate(time.Minute).Add(time.Minute)
	d := next.Sub(now) - 5*time.Second
	if d <= 0 {
		d += time.Minute // already in the last 5 s of a minute
	}
	srv.Advance(d)
	var s client.Schedule
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var err error
		if s, err = srv.Client.Schedule(ctx, "tick"); err != nil {
			t.Fatal(err)
		}
		if s.LastFire != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the next firing was not sent ahead")
		}
	}
	// The CLI's clock is the broker's virtual one, as an operator's
	// watch would be the broker's real one.
	res := runAt(srv, "schedule", "get", "tick")
	res.wantCode(t, ExitOK)
	for _, w := range []string{"sent ahead:", " CET (", "then:", "latest firings:", "pending, sent ahead: "} {
		if !strings.Contains(res.stdout, w) {
			t.Errorf("schedule get lacks %q:\n%s", w, res.stdout)
		}
	}
	for _, line := range strings.Split(res.stdout, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), ":") {
			t.Errorf("a line without its label: %q", line)
		}
	}
	if strings.Contains(res.stdout, "last fire:") {
		t.Errorf("a firing still to come is called the last fire:\n%s", res.stdout)
	}
	r.run("schedule", "pause", "tick").wantCode(t, ExitOK)
	res = r.run("schedule", "resume", "tick", "--json")
	res.wantCode(t, ExitOK)
	if err := json.Unmarshal([]byte(res.stdout), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Next) == 0 || s.LastFire >= s.Next[0] || len(s.NextLocal) != len(s.Next) || !strings.HasSuffix(s.NextLocal[0], "+01:00") {
		t.Fatalf("after pause and resume: last %d, next %v, local %v", s.LastFire, s.Next, s.NextLocal)
	}
	res = r.run("schedule", "firings", "tick", "--json")
	res.wantCode(t, ExitOK)
	var fs client.ScheduleFirings
	if err := json.Unmarshal([]byte(res.stdout), &fs); err != nil || fs.TZ != "Europe/Berlin" {
		t.Fatalf("firings --json: %v %+v", err, fs)
	}
}

// runAt runs a command line with the CLI's clock at the broker's time.
func runAt(srv *hourglasstest.Server, args ...string) result {
	var out, errb bytes.Buffer
	a := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Now: srv.Now,
		LookupEnv: func(k string) (string, bool) { return srv.URL, k == "HOURGLASS_SERVER" }}
	code := a.Run(context.Background(), args)
	return result{code, out.String(), errb.String()}
}
