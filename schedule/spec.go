package schedule

import (
	"strings"
	"time"
	// The IANA zone database inside the binary (about 450 KB), used when
	// the system has none: a broker in a minimal container without
	// /usr/share/zoneinfo still knows Europe/Berlin.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	"github.com/hourglass-mq/hourglass/errs"
)

// parser reads the standard 5-field cron syntax (minute hour day-of-month
// month day-of-week) and the descriptors (@hourly, @daily, @every 10m, ...).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit is robfig/cron's mark of a field written "*" (or "?"); on the
// hour field it tells an hour-agnostic schedule from a wall-clock one.
const starBit = 1 << 63

// Spec is a parsed cron expression in a time zone. It is immutable.
type Spec struct {
	expr string
	loc  *time.Location
	// Exactly one of cron and every is set.
	cron  *cron.SpecSchedule
	every time.Duration
	// wall is true when the hour field names hours: such a schedule is
	// about the wall clock, so it fires once in a repeated hour and at the
	// end of a skipped one (see the package doc).
	wall bool
}

// ParseSpec parses expr in the IANA time zone tz ("" means UTC). Errors
// are invalid_argument and say what is wrong.
func ParseSpec(expr, tz string) (*Spec, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, errs.New(errs.InvalidArgument, "cron is required, e.g. \"0 9 * * *\" or \"@every 10m\"")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errs.New(errs.InvalidArgument, "cron %q names a time zone; give it in the tz field instead", expr)
	}
	if tz == "" {
		tz = "UTC"
	}
	if tz == "Local" || strings.ContainsAny(tz, "\x00") {
		return nil, errs.New(errs.InvalidArgument, "tz %q is not an IANA time zone name such as Europe/Berlin or UTC", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "tz %q is not a known IANA time zone name (such as Europe/Berlin or UTC)", tz)
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		// robfig/cron rounds a duration to whole seconds, at least one;
		// refuse what it would silently change.
		if every, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && (every < time.Second || every%time.Second != 0) {
			return nil, errs.New(errs.InvalidArgument, "cron %q: @every needs whole seconds, at least 1s", expr)
		}
	}
	sched, err := parser.Parse(expr)
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "cron %q is not valid: %v; want 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily or @every 10m", expr, err)
	}
	s := &Spec{expr: expr, loc: loc}
	switch c := sched.(type) {
	case *cron.SpecSchedule:
		cp := *c
		cp.Location = loc
		s.cron = &cp
		s.wall = cp.Hour&starBit == 0
		// A schedule such as "0 0 30 2 *" never fires: robfig/cron gives
		// up after five years.
		if s.cron.Next(time.Now().In(loc)).IsZero() {
			return nil, errs.New(errs.InvalidArgument, "cron %q never fires (no such date)", expr)
		}
	case cron.ConstantDelaySchedule:
		s.every = c.Delay
	default:
		return nil, errs.New(errs.InvalidArgument, "cron %q is not supported", expr)
	}
	return s, nil
}

// Expr returns the expression as given (trimmed).
func (s *Spec) Expr() string { return s.expr }

// Location returns the schedule's time zone.
func (s *Spec) Location() *time.Location { return s.loc }

// Next returns the first fire time strictly after after, in Unix ms; 0 if
// there is none within five years. anchor is the schedule's creation time:
// @every fires at anchor + k·d, so restarts do not shift its phase.
func (s *Spec) Next(after, anchor int64) int64 {
	if s.every > 0 {
		d := s.every.Milliseconds()
		if after < anchor {
			return anchor + d
		}
		return anchor + ((after-anchor)/d+1)*d
	}
	t := time.UnixMilli(after).In(s.loc)
	if !s.wall {
		return ms(s.cron.Next(t))
	}
	n := s.cron.Next(t)
	for !n.IsZero() && repeatedWall(n) {
		n = s.cron.Next(n)
	}
	if n.IsZero() {
		return 0
	}
	if g, ok := s.gapFire(t, n); ok {
		return ms(g)
	}
	return ms(n)
}

// NextN returns up to n fire times after after.
func (s *Spec) NextN(after, anchor int64, n int) []int64 {
	var out []int64
	for len(out) < n {
		t := s.Next(after, anchor)
		if t == 0 {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}

// repeatedWall reports whether t's wall-clock time already occurred at an
// earlier instant: t lies in the hour (or so) that a backward transition
// repeats, and this is its second occurrence.
func repeatedWall(t time.Time) bool {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, prevOff := start.Add(-time.Nanosecond).Zone()
	_, curOff := t.Zone()
	back := time.Duration(prevOff-curOff) * time.Second
	return back > 0 && t.Sub(start) < back
}

// gapFire finds the first forward transition in (after, n] whose skipped
// wall-clock times include one the schedule names; the schedule then fires
// at the transition, the first instant after the skipped time.
func (s *Spec) gapFire(after, n time.Time) (time.Time, bool) {
	u := after
	for {
		_, end := u.ZoneBounds()
		if end.IsZero() || end.After(n) {
			return time.Time{}, false
		}
		_, oldOff := end.Add(-time.Nanosecond).Zone()
		_, newOff := end.Zone()
		if gap := time.Duration(newOff-oldOff) * time.Second; gap > 0 && end.After(after) {
			// The skipped wall times are [w, w+gap), w the transition
			// read with the old offset.
			w := end.In(time.FixedZone("", oldOff))
			for m := time.Duration(0); m < gap; m += time.Minute {
				if s.matches(w.Add(m)) {
					return end, true
				}
			}
		}
		u = end
	}
}

// matches reports whether the wall-clock minute of w (read in w's zone)
// is one the cron fields name.
func (s *Spec) matches(w time.Time) bool {
	c := s.cron
	bit := func(field uint64, v int) bool { return field&(1<<uint(v)) != 0 }
	if !bit(c.Month, int(w.Month())) || !bit(c.Hour, w.Hour()) || !bit(c.Minute, w.Minute()) {
		return false
	}
	dom, dow := bit(c.Dom, w.Day()), bit(c.Dow, int(w.Weekday()))
	if c.Dom&starBit != 0 || c.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
