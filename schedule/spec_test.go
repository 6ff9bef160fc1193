package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
)

func utc(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

func fmtAll(ts []int64) string {
	var out []string
	for _, t := range ts {
		out = append(out, time.UnixMilli(t).UTC().Format(time.RFC3339))
	}
	return strings.Join(out, " ")
}

func mustSpec(t *testing.T, expr, tz string) *Spec {
	t.Helper()
	s, err := ParseSpec(expr, tz)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNextFireTimes: plain schedules, in UTC and in a zone.
func TestNextFireTimes(t *testing.T) {
	cases := []struct {
		expr, tz, after string
		want            string // RFC 3339, UTC
	}{
		{"*/15 * * * *", "", "2026-11-30T10:07:00Z", "2026-11-30T10:15:00Z 2026-11-30T10:30:00Z 2026-11-30T10:45:00Z"},
		{"0 9 * * *", "Europe/Berlin", "2026-11-30T10:00:00Z", "2026-12-01T08:00:00Z 2026-12-02T08:00:00Z 2026-12-03T08:00:00Z"},
		{"0 9 * * 1-5", "America/New_York", "2026-12-04T15:00:00Z", "2026-12-07T14:00:00Z 2026-12-08T14:00:00Z 2026-12-09T14:00:00Z"},
		{"@daily", "Asia/Tokyo", "2026-11-30T16:00:00Z", "2026-12-01T15:00:00Z 2026-12-02T15:00:00Z 2026-12-03T15:00:00Z"},
		// The next fire is strictly after: a fire at "after" itself is not repeated.
		{"0 * * * *", "", "2026-11-30T10:00:00Z", "2026-11-30T11:00:00Z 2026-11-30T12:00:00Z 2026-11-30T13:00:00Z"},
	}
	for _, c := range cases {
		got := fmtAll(mustSpec(t, c.expr, c.tz).NextN(utc(c.after), 0, 3))
		if got != c.want {
			t.Errorf("%s in %q after %s:\n got %s\nwant %s", c.expr, c.tz, c.after, got, c.want)
		}
	}
}

// TestEveryKeepsItsPhase: @every fires at creation + k·d, whatever time
// the next fire is asked after (a restart does not shift it).
func TestEveryKeepsItsPhase(t *testing.T) {
	s := mustSpec(t, "@every 10m", "Europe/Berlin")
	anchor := utc("2026-11-30T10:03:20Z")
	if got := fmtAll(s.NextN(anchor, anchor, 2)); got != "2026-11-30T10:13:20Z 2026-11-30T10:23:20Z" {
		t.Fatalf("from the anchor: %s", got)
	}
	if got := fmtAll(s.NextN(utc("2026-11-30T11:00:00Z"), anchor, 1)); got != "2026-11-30T11:03:20Z" {
		t.Fatalf("after a gap: %s", got)
	}
}

// TestDSTBerlin2026 pins what a schedule does on the two days of 2026 when
// Europe/Berlin changes its clocks (see the package doc):
//
//   - 29 March: 02:00 CET jumps to 03:00 CEST; 02:00-02:59 do not exist.
//   - 25 October: 03:00 CEST falls back to 02:00 CET; 02:00-02:59 happen twice.
func TestDSTBerlin2026(t *testing.T) {
	cases := []struct {
		name, expr, after string
		want              string // UTC
	}{
		// A daily 02:30 fires at 03:00 CEST (01:00 UTC) on the day its
		// time does not exist, then at 02:30 CEST again.
		{"daily in the gap", "30 2 * * *", "2026-03-28T12:00:00Z",
			"2026-03-29T01:00:00Z 2026-03-30T00:30:00Z 2026-03-31T00:30:00Z"},
		// A daily 02:30 fires once on the day its time happens twice, at
		// the first 02:30 (CEST, 00:30 UTC), not at the second (01:30 UTC).
		{"daily in the repeated hour", "30 2 * * *", "2026-10-24T12:00:00Z",
			"2026-10-25T00:30:00Z 2026-10-26T01:30:00Z 2026-10-27T01:30:00Z"},
		// Several times inside the gap still give one fire.
		{"two times in the gap", "0,30 2 * * *", "2026-03-28T12:00:00Z",
			"2026-03-29T01:00:00Z 2026-03-30T00:00:00Z 2026-03-30T00:30:00Z"},
		// Hourly schedules follow real time: nothing is skipped in the
		// gap, and both real hours of the repeated one fire.
		{"hourly across the gap", "30 * * * *", "2026-03-29T00:00:00Z",
			"2026-03-29T00:30:00Z 2026-03-29T01:30:00Z 2026-03-29T02:30:00Z"},
		{"hourly across the repeated hour", "30 * * * *", "2026-10-25T00:00:00Z",
			"2026-10-25T00:30:00Z 2026-10-25T01:30:00Z 2026-10-25T02:30:00Z"},
		// A schedule untouched by the change is untouched.
		{"daily 09:00", "0 9 * * *", "2026-03-28T12:00:00Z",
			"2026-03-29T07:00:00Z 2026-03-30T07:00:00Z 2026-03-31T07:00:00Z"},
	}
	for _, c := range cases {
		got := fmtAll(mustSpec(t, c.expr, "Europe/Berlin").NextN(utc(c.after), 0, 3))
		if got != c.want {
			t.Errorf("%s (%s):\n got %s\nwant %s", c.name, c.expr, got, c.want)
		}
	}
}

func TestParseSpecRefusesNonsense(t *testing.T) {
	for _, c := range []struct{ expr, tz, want string }{
		{"61 * * * *", "", "above maximum"},
		{"* * * *", "", "not valid"},
		{"0 9 * * *", "Mars/Olympus_Mons", "not a known IANA time zone"},
		{"0 9 * * *", "Local", "not an IANA"},
		{"", "", "cron is required"},
		{"TZ=Europe/Berlin 0 9 * * *", "", "tz field"},
		{"@every 10ms", "", "at least 1s"},
		{"0 0 30 2 *", "", "never fires"},
		{"@fortnightly", "", "not valid"},
	} {
		_, err := ParseSpec(c.expr, c.tz)
		if err == nil || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSpec(%q, %q) = %v; want invalid_argument saying %q", c.expr, c.tz, err, c.want)
		}
	}
}
