package schedule

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// Create validates and durably adds a schedule. Of sc it uses the
// definition (ID, Topic, Key, Tag, Properties, Body, Cron, TZ, CatchUp);
// the rest is set here.
func (r *Runner) Create(def Schedule) (Info, error) {
	sc, spec, err := r.validate(def)
	if err != nil {
		return Info{}, err
	}
	r.opMu.Lock()
	defer r.opMu.Unlock()
	r.mu.Lock()
	err = r.checkNewLocked(sc)
	r.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	now := r.opts.Broker.Now()
	sc.Created, sc.Through = now, now
	if err := r.store.Put(sc); err != nil {
		return Info{}, errs.Wrap(errs.Unavailable, err, "schedule %q could not be stored", sc.ID)
	}
	e := &entry{sc: sc, spec: spec, index: -1}
	e.next = spec.Next(now, now)
	e.due = e.next - r.opts.Lead.Milliseconds()
	r.mu.Lock()
	r.addLocked(e)
	r.due.set(e)
	info := r.infoLocked(e, now)
	r.mu.Unlock()
	r.wake()
	return info, nil
}

func (r *Runner) checkNewLocked(sc *Schedule) error {
	if _, ok := r.entries[sc.ID]; ok {
		return errs.New(errs.AlreadyExists, "schedule %q already exists", sc.ID)
	}
	if len(r.entries) >= r.opts.MaxSchedules {
		return errs.New(errs.ResourceExhausted, "the broker has %d schedules, its limit", len(r.entries))
	}
	if n := sizeOf(sc); r.bytes+n > r.opts.MaxBytes {
		return errs.New(errs.ResourceExhausted, "the schedules hold %d bytes; this one's %d would pass their limit of %d (-max-schedule-bytes)", r.bytes, n, r.opts.MaxBytes)
	}
	if id, ok := r.byKey[topicKey(sc)]; ok {
		return errs.New(errs.AlreadyExists, "schedule %q already sends to topic %q with key %q; give this one another key", id, sc.Topic, keyOf(sc))
	}
	return nil
}

// validate checks a definition and returns the schedule to store.
func (r *Runner) validate(def Schedule) (*Schedule, *Spec, error) {
	if err := message.ValidateName("schedule id", def.ID); err != nil {
		return nil, nil, err
	}
	if err := message.ValidateName("topic", def.Topic); err != nil {
		return nil, nil, err
	}
	if engine.IsDeadLetterTopic(def.Topic) {
		return nil, nil, errs.New(errs.InvalidArgument, "topic %q: names starting with %%DLQ%% are reserved for dead-letter topics; a schedule cannot send to one", def.Topic)
	}
	spec, err := ParseSpec(def.Cron, def.TZ)
	if err != nil {
		return nil, nil, err
	}
	switch def.CatchUp {
	case "":
		def.CatchUp = CatchUpOnce
	case CatchUpSkip, CatchUpOnce, CatchUpAll:
	default:
		return nil, nil, errs.New(errs.InvalidArgument, "catch_up %q is not skip, once or all", def.CatchUp)
	}
	for _, p := range []string{PropSchedule, PropFireTime} {
		if _, ok := def.Properties[p]; ok {
			return nil, nil, errs.New(errs.InvalidArgument, "property %q is set by the broker on every firing; use another name", p)
		}
	}
	sc := &Schedule{ID: def.ID, Topic: def.Topic, Key: def.Key, Tag: def.Tag, Properties: maps.Clone(def.Properties),
		Body: append([]byte(nil), def.Body...), Cron: spec.Expr(), TZ: spec.Location().String(), CatchUp: def.CatchUp}
	// The firing as it will be sent, checked against the message limits now
	// rather than at its first fire time.
	sample := r.request(sc, &firing{fire: 1<<50 - 1, key: FireKey(keyOf(sc), 1<<50-1)})
	if err := r.opts.Limits.ValidateSystem(&sample.Message, sample.SystemProperties); err != nil {
		return nil, nil, fmt.Errorf("the messages of this schedule would be refused: %w", err)
	}
	return sc, spec, nil
}

// Get returns a schedule.
func (r *Runner) Get(id string) (Info, error) {
	now := r.opts.Broker.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		return Info{}, errs.New(errs.NotFound, "no schedule %q", id)
	}
	return r.infoLocked(e, now), nil
}

// List returns every schedule, by ID. What each entry holds is copied
// under the runner's lock, which firing needs too; the fire times, five
// a schedule, are computed after it is released (0.77 s for 100,000
// schedules under the lock, a review measured).
func (r *Runner) List() []Info {
	now := r.opts.Broker.Now()
	r.mu.Lock()
	snaps := make([]infoSnap, 0, len(r.entries))
	for _, e := range r.entries {
		snaps = append(snaps, r.snapLocked(e))
	}
	r.mu.Unlock()
	out := make([]Info, len(snaps))
	for i, s := range snaps {
		out[i] = s.info(now)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// infoSnap is what Info needs of an entry, copied under the runner's
// lock: a schedule is replaced, never changed in place, and a spec never
// changes, so the pointers stay valid after.
type infoSnap struct {
	sc      *Schedule
	spec    *Spec
	next    int64
	lastErr string
}

func (r *Runner) snapLocked(e *entry) infoSnap {
	s := infoSnap{sc: e.sc, spec: e.spec, next: e.next, lastErr: e.lastErr}
	if err := r.failed; err != nil {
		s.lastErr = "schedules stopped: " + err.Error()
	} else if err := r.store.Err(); err != nil {
		s.lastErr = "schedules stopped: " + err.Error()
	}
	return s
}

func (s infoSnap) info(now int64) Info {
	info := Info{Schedule: *s.sc, LastError: s.lastErr}
	info.Properties = maps.Clone(s.sc.Properties)
	if !s.sc.Paused {
		from := now
		if s.next != 0 && s.next <= now {
			from = s.next - 1 // a firing still owed (catch-up) comes first
		}
		info.Next = s.spec.NextN(from, s.sc.Created, 5)
	}
	return info
}

func (r *Runner) infoLocked(e *entry, now int64) Info { return r.snapLocked(e).info(now) }

// Pause stops a schedule: the firings sent ahead are cancelled, and fire
// times that pass while it is paused are skipped. Pausing a paused
// schedule cancels what an earlier pause could not (see pause), and
// changes nothing else. An error after the schedule is paused says which
// firings sent ahead may still be delivered.
func (r *Runner) Pause(id string) (Info, error) {
	r.opMu.Lock()
	defer r.opMu.Unlock()
	e, err := r.lookup(id)
	if err != nil {
		return Info{}, err
	}
	now := r.opts.Broker.Now()
	err = r.pause(e, now)
	r.mu.Lock()
	info := r.infoLocked(e, now)
	r.mu.Unlock()
	r.wake()
	return info, err
}

// pause makes e's schedule paused durably, then cancels the firings it
// sent ahead of now (opMu held). The paused state is stored first and
// keeps LastFire, the latest firing sent ahead, so that a start after a
// crash, or a pause again after a cancel failed, still knows what to
// cancel (invariant S3). Once every one is cancelled, LastFire becomes the
// latest firing at or before now, so that a resume shows no "last" after
// its "next" (a resume before their time sends them again). The cancels go
// newest first and stop at the first failure: what is left pending is a
// prefix of the firings sent ahead, which a resume looks up by key, as
// after a restart (entry.uncertain), so that each fires once.
func (r *Runner) pause(e *entry, now int64) error {
	if !e.sc.Paused {
		sc := e.sc.clone()
		sc.Paused = true
		if sc.LastFire > now {
			sc.Through = now
		}
		if err := r.put(e, sc); err != nil {
			return err
		}
	}
	if e.sc.LastFire <= now {
		return nil
	}
	if err := r.cancelAhead(e.sc, e.spec, now); err != nil {
		r.mu.Lock()
		e.lastErr = "firings sent ahead not cancelled: " + err.Error()
		r.mu.Unlock()
		return errs.Wrap(errs.Unavailable, err, "schedule %q is paused, but firings it sent ahead (up to %s) could not all be cancelled and may still be delivered; pause it again to retry (a restart retries too)",
			e.sc.ID, time.UnixMilli(e.sc.LastFire).UTC().Format(time.RFC3339))
	}
	sc := e.sc.clone()
	sc.LastFire, sc.LastID = r.lastSent(sc, e.spec, now)
	if err := r.put(e, sc); err != nil {
		return err
	}
	r.mu.Lock()
	e.lastErr = ""
	r.mu.Unlock()
	return nil
}

// put stores sc as e's state and swaps it in (opMu held).
func (r *Runner) put(e *entry, sc *Schedule) error {
	if err := r.store.Put(sc); err != nil {
		return errs.Wrap(errs.Unavailable, err, "schedule %q could not be stored", sc.ID)
	}
	r.mu.Lock()
	e.sc = sc
	r.due.set(e)
	r.mu.Unlock()
	return nil
}

// lastSent is the latest fire time of sc at or before now whose message
// exists, with its ID; 0 and "" when there is none (among the few latest).
func (r *Runner) lastSent(sc *Schedule, spec *Spec, now int64) (int64, string) {
	for _, t := range latestFireTimes(spec, sc.Created, now, 3) {
		if id, err := r.opts.Broker.LookupKey(sc.Topic, FireKey(keyOf(sc), t)); err == nil {
			return t, id.String()
		}
	}
	return 0, ""
}

// Resume restarts a paused schedule from now; resuming an active one
// changes nothing. Firings sent ahead that a pause could not cancel are
// looked up by key before their fire times are sent again.
func (r *Runner) Resume(id string) (Info, error) {
	return r.change(id, func(e *entry, sc *Schedule, now int64) {
		if !sc.Paused {
			return
		}
		sc.Paused = false
		sc.Through = max(sc.Through, now)
		e.next = e.spec.Next(sc.Through, sc.Created)
		e.due = e.next - r.opts.Lead.Milliseconds()
		e.uncertain = sc.LastFire > now
	})
}

// change applies f to a copy of schedule id's state, stores it and swaps
// it in.
func (r *Runner) change(id string, f func(e *entry, sc *Schedule, now int64)) (Info, error) {
	r.opMu.Lock()
	defer r.opMu.Unlock()
	e, err := r.lookup(id)
	if err != nil {
		return Info{}, err
	}
	now := r.opts.Broker.Now()
	sc := e.sc.clone()
	was := *e.sc
	f(e, sc, now)
	if sc.Paused != was.Paused || sc.Through != was.Through || sc.LastFire != was.LastFire {
		if err := r.store.Put(sc); err != nil {
			return Info{}, errs.Wrap(errs.Unavailable, err, "schedule %q could not be stored", id)
		}
	}
	r.mu.Lock()
	e.sc = sc
	r.due.set(e)
	info := r.infoLocked(e, now)
	r.mu.Unlock()
	r.wake()
	return info, nil
}

// Delete removes a schedule; the firings sent ahead are cancelled first,
// as by a pause. If they cannot all be, the schedule stays, paused, and
// the error says so: a delete again finishes it.
func (r *Runner) Delete(id string) (Info, error) {
	r.opMu.Lock()
	defer r.opMu.Unlock()
	e, err := r.lookup(id)
	if err != nil {
		return Info{}, err
	}
	now := r.opts.Broker.Now()
	if err := r.pause(e, now); err != nil {
		return Info{}, errs.Wrap(errs.Unavailable, err, "schedule %q is not deleted; delete it again", id)
	}
	if err := r.store.Delete(id); err != nil {
		return Info{}, errs.Wrap(errs.Unavailable, err, "schedule %q could not be deleted", id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	info := r.infoLocked(e, now)
	info.Next = nil
	r.removeLocked(e)
	if e.index >= 0 {
		heap.Remove(&r.due, e.index)
	}
	return info, nil
}

// lookup returns the entry of schedule id, or NotFound.
func (r *Runner) lookup(id string) (*entry, error) {
	r.mu.Lock()
	e, ok := r.entries[id]
	r.mu.Unlock()
	if !ok {
		return nil, errs.New(errs.NotFound, "no schedule %q", id)
	}
	return e, nil
}

// topicKey is the byKey index's key of a schedule: no two schedules send
// to one topic with one key.
func topicKey(sc *Schedule) string { return sc.Topic + "\x00" + keyOf(sc) }

// sizeOf is what a schedule counts against MaxBytes.
func sizeOf(sc *Schedule) int64 {
	n := len(sc.Body) + len(sc.Key) + len(sc.Tag) + len(sc.ID) + len(sc.Topic)
	for k, v := range sc.Properties {
		n += len(k) + len(v)
	}
	return int64(n)
}

// addLocked and removeLocked keep entries, byKey and bytes together.
func (r *Runner) addLocked(e *entry) {
	r.entries[e.sc.ID] = e
	r.byKey[topicKey(e.sc)] = e.sc.ID
	r.bytes += sizeOf(e.sc)
}

func (r *Runner) removeLocked(e *entry) {
	delete(r.entries, e.sc.ID)
	if r.byKey[topicKey(e.sc)] == e.sc.ID {
		delete(r.byKey, topicKey(e.sc))
	}
	r.bytes -= sizeOf(e.sc)
}

func keyOf(sc *Schedule) string {
	if sc.Key != "" {
		return sc.Key
	}
	return sc.ID
}

// maxAhead bounds the firings cancelAhead looks for: the lead (20 s by
// default) holds at most one firing a second (@every is at least 1s).
const maxAhead = 10_000

// cancelAhead cancels every firing of sc sent ahead of now: each fire time
// in (now, sc.LastFire], found by its key (FireKey), newest first. The
// runner sends all the firings due within its lead, so an @every schedule
// of a second has about twenty waiting, not one. One already due or
// cancelled stays as it is. It stops at the first that fails, and returns
// why: the firings left pending are then the oldest (see pause).
func (r *Runner) cancelAhead(sc *Schedule, spec *Spec, now int64) error {
	var times []int64
	for t := spec.Next(now, sc.Created); t != 0 && t <= sc.LastFire && len(times) < maxAhead; t = spec.Next(t, sc.Created) {
		times = append(times, t)
	}
	for _, t := range slices.Backward(times) {
		id, err := r.opts.Broker.LookupKey(sc.Topic, FireKey(keyOf(sc), t))
		if errors.Is(err, errs.ErrNotFound) {
			continue
		}
		if err == nil {
			err = r.opts.Broker.Cancel(context.Background(), id)
		}
		if err != nil && !errors.Is(err, errs.ErrPrecondition) && !errors.Is(err, errs.ErrNotFound) {
			return fmt.Errorf("cancel the firing at %s: %w", time.UnixMilli(t).UTC().Format(time.RFC3339), err)
		}
	}
	return nil
}
