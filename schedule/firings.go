package schedule

import (
	"errors"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// Firing is one fire time of a schedule and what became of it, found by
// its key (FireKey) in the engine: the message the runner sent, or none.
type Firing struct {
	// Fire is the fire time, Unix ms.
	Fire int64
	// Key is the firing's message key.
	Key string
	// Sent is true when the message exists: ID and State are then set.
	// A fire time without one was skipped (paused, catch-up skip) or its
	// message is past retention.
	Sent  bool
	ID    message.ID
	State engine.State
	// Ahead marks a firing sent ahead of its fire time (within the lead):
	// it is pending until then.
	Ahead bool
}

// MaxFirings bounds the fire times Firings looks at.
const MaxFirings = 50

// Firings returns what became of the schedule's latest fire times, newest
// first: those sent ahead of now (at most the lead's worth), then up to n
// at or before now and after its creation. Each is looked up by its key,
// so the answer is the engine's, not the journal's.
func (r *Runner) Firings(id string, n int) ([]Firing, error) {
	if n < 1 || n > MaxFirings {
		return nil, errs.New(errs.InvalidArgument, "n %d is not in [1, %d]", n, MaxFirings)
	}
	now := r.opts.Broker.Now()
	r.mu.Lock()
	e, ok := r.entries[id]
	var sc *Schedule
	var spec *Spec
	if ok {
		sc, spec = e.sc, e.spec
	}
	r.mu.Unlock()
	if !ok {
		return nil, errs.New(errs.NotFound, "no schedule %q", id)
	}
	var times []int64
	for t := spec.Next(now, sc.Created); t != 0 && t <= sc.LastFire && len(times) < maxAhead; t = spec.Next(t, sc.Created) {
		times = append([]int64{t}, times...) // newest first
	}
	ahead := len(times)
	times = append(times, latestFireTimes(spec, sc.Created, now, n)...)
	out := make([]Firing, 0, len(times))
	for i, t := range times {
		f := Firing{Fire: t, Key: FireKey(keyOf(sc), t), Ahead: i < ahead}
		mid, err := r.opts.Broker.LookupKey(sc.Topic, f.Key)
		switch {
		case errors.Is(err, errs.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			info, err := r.opts.Broker.Inspect(mid)
			if err != nil && !errors.Is(err, errs.ErrNotFound) {
				return nil, err
			}
			f.Sent, f.ID, f.State = err == nil, mid, info.State
		}
		out = append(out, f)
	}
	return out, nil
}

// latestFireTimes returns up to n fire times at or before now and after
// created, newest first. It looks back over a window that doubles until
// it holds n of them or reaches created, so a minutely schedule takes a
// few steps and a yearly one a few dozen.
func latestFireTimes(s *Spec, created, now int64, n int) []int64 {
	var got []int64
	for w := time.Minute.Milliseconds(); ; w *= 2 {
		from := max(now-w, created)
		got = got[:0]
		for t := s.Next(from, created); t != 0 && t <= now; t = s.Next(t, created) {
			got = append(got, t)
		}
		if len(got) >= n || from == created {
			break
		}
	}
	if len(got) > n {
		got = got[len(got)-n:]
	}
	for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
		got[i], got[j] = got[j], got[i]
	}
	return got
}
