package schedule

import (
	"container/heap"
	"time"
)

// CatchUp says what a schedule does with fire times that passed while the
// broker was down.
type CatchUp string

// The catch-up policies.
const (
	// CatchUpSkip sends none of them; the schedule goes on from now.
	CatchUpSkip CatchUp = "skip"
	// CatchUpOnce sends one message, for the latest of them (the default).
	CatchUpOnce CatchUp = "once"
	// CatchUpAll sends one message for each, in order, at once.
	CatchUpAll CatchUp = "all"
)

// CatchUps lists the policies.
func CatchUps() []CatchUp { return []CatchUp{CatchUpSkip, CatchUpOnce, CatchUpAll} }

// Schedule is one schedule: its definition, and its progress.
type Schedule struct {
	// ID names the schedule; the rules of a topic name.
	ID string
	// Topic receives the messages.
	Topic string
	// Key is the business key its messages carry, followed by
	// "@<fire time>" (RFC 3339, UTC, milliseconds), so every firing can
	// be inspected by key and none is stored twice. Default: the ID.
	Key string
	// Tag, Properties and Body are those of every message.
	Tag        string
	Properties map[string]string
	Body       []byte
	// Cron is the expression; TZ its IANA time zone ("UTC" by default).
	Cron string
	TZ   string
	// CatchUp is the policy for fire times missed while the broker was down.
	CatchUp CatchUp
	// Created is when the schedule was created (Unix ms): fire times are
	// after it, and @every counts from it.
	Created int64
	// Paused schedules send nothing; fire times that pass while paused are
	// skipped whatever the catch-up policy.
	Paused bool
	// Through: every fire time at or before it is done (sent, skipped by
	// policy, or passed while paused).
	Through int64
	// LastFire is the latest fire time whose message was sent, 0 if none;
	// LastID is that message's ID. The message is sent ahead of its fire
	// time (Options.Lead), so LastFire may still be in the future.
	LastFire int64
	LastID   string
}

// clone returns a deep copy of the parts of sc that change.
func (sc *Schedule) clone() *Schedule {
	c := *sc
	return &c
}

// FireKey returns the message key of the firing at fire (Unix ms).
func FireKey(key string, fire int64) string {
	return key + "@" + time.UnixMilli(fire).UTC().Format("2006-01-02T15:04:05.000Z")
}

// Properties every firing carries besides the schedule's own, which may
// not use these names.
const (
	PropSchedule = "hourglass-schedule"
	PropFireTime = "hourglass-fire-time"
)

// entry is a schedule in the runner.
type entry struct {
	sc   *Schedule
	spec *Spec
	// next is the next fire time to send, 0 when none (paused, or no more).
	next int64
	// due is when the runner acts on it: next - Lead, or later after an
	// error (retryAt).
	due int64
	// uncertain: the fire at next may have been sent before a crash
	// without its progress reaching the journal; the runner looks its key
	// up before sending it.
	uncertain bool
	lastErr   string
	failures  int
	index     int // in the due heap, -1 when not in it
}

// dueHeap orders active entries by due time.
type dueHeap []*entry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

// set puts e in h at its due time, or takes it out when it has nothing to
// send.
func (h *dueHeap) set(e *entry) {
	switch {
	case e.next == 0 || e.sc.Paused:
		if e.index >= 0 {
			heap.Remove(h, e.index)
		}
	case e.index >= 0:
		heap.Fix(h, e.index)
	default:
		heap.Push(h, e)
	}
}
