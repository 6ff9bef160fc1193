package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hourglass-mq/hourglass/message"
)

// This file is the oracle of the crash, power-loss, torn-tail, clock and
// disk-full tests: a ledger of what the engine told its clients, a model
// built from it, and a checker that compares what a (recovered) engine
// serves with the model.

// evKind is what a ledger event records.
type evKind uint8

const (
	evSend    evKind = iota + 1 // a Send
	evCancel                    // a Cancel
	evResched                   // a Reschedule
	evSeen                      // a consumer read a visible entry
)

// evState is how an operation ended, as far as the client knows.
type evState uint8

const (
	// evAcked: the call returned success; its effect must survive.
	evAcked evState = iota + 1
	// evFailed: the call returned an error; it must have had no effect.
	evFailed
	// evDoubt: the call was started and never answered (the process died,
	// or a crash image was taken while it ran): either outcome is allowed.
	evDoubt
)

// event is one entry of a ledger.
type event struct {
	kind  evKind
	state evState
	id    message.ID // send: the receipt's ID; cancel, reschedule, seen: the target
	topic string
	key   string
	body  string // send: unique per send, so an unacknowledged message can be named
	due   int64  // acknowledged send or reschedule: the due time the engine returned
	// lo and hi bound the due time a reschedule in doubt may have set.
	lo, hi int64
	// queue and offset place a seen entry.
	queue  int
	offset uint64
	// dedup is a send's dedup ID ("" for none) and when its delivery
	// options, so that it can be sent again as a retry.
	dedup string
	when  message.When
	// cycle and seen say, for a kill -9 run's diagnostics, in which child
	// and when (parent's Unix ms) the operation was answered.
	cycle int
	seen  int64
}

// expect is what the model says about one acknowledged message.
type expect struct {
	id               message.ID
	topic, key, body string
	due              int64      // due time after every acknowledged reschedule
	oldDues          []int64    // due times replaced by acknowledged reschedules
	alt              [][2]int64 // due-time ranges a reschedule in doubt may have set
	cancelled        bool       // an acknowledged cancel: never visible
	maybeCancelled   bool       // a cancel in doubt
	dedup            string     // the send's dedup ID, if any
	when             message.When
}

// possible reports whether d is a due time the message may have.
func (x *expect) possible(d int64) bool {
	if d == x.due {
		return true
	}
	for _, r := range x.alt {
		if d >= r[0] && d <= r[1] {
			return true
		}
	}
	return false
}

// resolve settles the reschedules in doubt with the due time the engine
// shows now, once a check has found it possible: a later check (after a
// restart that ran retention) must judge by the due the message really had,
// not by the latest it might have had. A reschedule in doubt that was lost
// left the message due, and lawfully retired, at its old time.
func (m *model) resolve(e *Engine) {
	for _, x := range m.order {
		if len(x.alt) == 0 {
			continue
		}
		if info, err := e.Inspect(x.id); err == nil && x.possible(info.Due) {
			x.due, x.alt = info.Due, nil
		}
	}
}

// minDue and maxDue bound the due times the message may have.
func (x *expect) minDue() int64 {
	m := x.due
	for _, r := range x.alt {
		m = min(m, r[0])
	}
	return m
}

func (x *expect) maxDue() int64 {
	m := x.due
	for _, r := range x.alt {
		m = max(m, r[1])
	}
	return m
}

type keyExpect struct {
	id    message.ID
	doubt bool // a send with this key in doubt came after it
}

type seenEntry struct {
	topic  string
	queue  int
	offset uint64
	id     message.ID
}

// model is the state a correct engine must serve after the ledger's events.
type model struct {
	msgs  map[message.ID]*expect
	order []*expect
	// maybe holds the bodies of sends in doubt: such a message may exist.
	maybe map[string]bool
	keys  map[string]*keyExpect // topic + "\x00" + key
	seen  []seenEntry
	// retiredBefore: a message whose record retention removed is accounted
	// for only if it was due at or before this time (it must have been
	// visible for the retention period before its segment could go).
	retiredBefore int64
}

// buildModel replays a ledger into a model.
func buildModel(events []event) *model {
	m := &model{msgs: map[message.ID]*expect{}, maybe: map[string]bool{}, keys: map[string]*keyExpect{}}
	for _, ev := range events {
		m.apply(ev)
	}
	return m
}

func (m *model) apply(ev event) {
	if ev.state == evFailed {
		return
	}
	switch ev.kind {
	case evSend:
		if ev.state == evDoubt {
			m.maybe[ev.body] = true
			if ev.key != "" {
				if k := m.keys[ev.topic+"\x00"+ev.key]; k != nil {
					k.doubt = true
				}
			}
			return
		}
		x := &expect{id: ev.id, topic: ev.topic, key: ev.key, body: ev.body, due: ev.due, dedup: ev.dedup, when: ev.when}
		m.msgs[ev.id] = x
		m.order = append(m.order, x)
		if ev.key != "" {
			m.keys[ev.topic+"\x00"+ev.key] = &keyExpect{id: ev.id}
		}
	case evCancel:
		x := m.msgs[ev.id]
		if x == nil {
			return // a message the ledger never saw acknowledged
		}
		if ev.state == evAcked {
			x.cancelled = true
		} else {
			x.maybeCancelled = true
		}
	case evResched:
		x := m.msgs[ev.id]
		if x == nil {
			return
		}
		if ev.state == evAcked {
			if ev.due != x.due {
				x.oldDues = append(x.oldDues, x.due)
			}
			x.due = ev.due
			x.alt = nil // an acknowledged change supersedes one in doubt before it
		} else {
			x.alt = append(x.alt, [2]int64{ev.lo, ev.hi})
		}
	case evSeen:
		m.seen = append(m.seen, seenEntry{topic: ev.topic, queue: ev.queue, offset: ev.offset, id: ev.id})
	}
}

// horizon is the latest due time any message of the model may have.
func (m *model) horizon() int64 {
	h := int64(0)
	for _, x := range m.order {
		h = max(h, x.maxDue())
	}
	return h
}

// report counts what the checker found. Every field from Lost on must be
// zero for a correct engine.
type report struct {
	Acked, Cancelled, Visible, Pending, Retired, UnackedVisible int

	Lost             int // acknowledged, not cancelled, due, and not visible (or gone)
	CancelledVisible int // an acknowledged cancel, yet visible
	CancelLost       int // an acknowledged cancel the engine no longer knows
	Early            int // visible before its due time
	Duplicates       int // the same message visible more than once
	OldTime          int // visible with a due time an acknowledged reschedule replaced
	WrongDue         int // due time that no acknowledged operation gave
	Phantom          int // visible, but no client ever sent it
	Corrupt          int // served bytes differ from what was sent
	Moved            int // an entry a consumer saw is no longer at its offset
	KeyMiss          int // LookupKey does not return the latest message of a key
	Unreadable       int // the engine failed to serve a queue or a message

	problems []string
}

func (r *report) bad(counter *int, format string, args ...any) {
	*counter++
	if len(r.problems) < 12 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// failures is the number of violations.
func (r *report) failures() int {
	return r.Lost + r.CancelledVisible + r.CancelLost + r.Early + r.Duplicates + r.OldTime +
		r.WrongDue + r.Phantom + r.Corrupt + r.Moved + r.KeyMiss + r.Unreadable
}

func (r *report) String() string {
	s := fmt.Sprintf("acked=%d cancelled=%d visible=%d pending=%d retired=%d unacked-visible=%d | "+
		"lost=%d cancelled-visible=%d cancel-lost=%d early=%d duplicates=%d old-time=%d wrong-due=%d "+
		"phantom=%d corrupt=%d moved=%d key-miss=%d unreadable=%d",
		r.Acked, r.Cancelled, r.Visible, r.Pending, r.Retired, r.UnackedVisible,
		r.Lost, r.CancelledVisible, r.CancelLost, r.Early, r.Duplicates, r.OldTime, r.WrongDue,
		r.Phantom, r.Corrupt, r.Moved, r.KeyMiss, r.Unreadable)
	if len(r.problems) > 0 {
		s += "\n  " + strings.Join(r.problems, "\n  ")
	}
	return s
}

// servedEntry is one visible entry as the engine serves it.
type servedEntry struct {
	Visible
	topic string
	queue int
}

// queueReader is what readAllVisible needs of a broker.
type queueReader interface {
	Topics() []TopicInfo
	ReadQueue(topic string, queue int, from uint64, max int) ([]Visible, error)
}

// checkTarget is what the checker reads of a broker. *Engine serves it
// through engineTarget; the checker's self-test (checker_self_test.go)
// serves it from a deliberately wrong fake, so that every counter is shown
// to fire.
type checkTarget interface {
	queueReader
	Inspect(id message.ID) (Info, error)
	LookupKey(topic, key string) (message.ID, error)
	// logStart is the first log position still held: a message before it
	// may have been removed by retention.
	logStart() uint64
}

// engineTarget adapts an engine to checkTarget.
type engineTarget struct{ *Engine }

func (e engineTarget) logStart() uint64 { return uint64(e.clog.Start()) }

// readAllVisible returns every visible entry of every topic queue.
func readAllVisible(e queueReader) ([]servedEntry, error) {
	var out []servedEntry
	topics := e.Topics()
	slices.SortFunc(topics, func(a, b TopicInfo) int { return strings.Compare(a.Name, b.Name) })
	for _, ti := range topics {
		for q := 0; q < ti.Queues; q++ {
			vs, err := e.ReadQueue(ti.Name, q, 0, 1<<30)
			if err != nil {
				return nil, fmt.Errorf("read %s/%d: %w", ti.Name, q, err)
			}
			for _, v := range vs {
				out = append(out, servedEntry{Visible: v, topic: ti.Name, queue: q})
			}
		}
	}
	return out, nil
}

// checkEngine compares what e serves with m. The caller has waited until e
// settled at now (see settled): every message whose due time is at or
// before now must then be visible, and no later one may be.
func checkEngine(e *Engine, m *model, now int64) *report {
	return checkServed(engineTarget{e}, m, now)
}

// checkServed is checkEngine for any broker that serves checkTarget.
func checkServed(e checkTarget, m *model, now int64) *report {
	r := &report{Acked: len(m.order)}
	served, err := readAllVisible(e)
	if err != nil {
		r.bad(&r.Unreadable, "%v", err)
		return r
	}
	start := e.logStart()
	count, at := r.checkVisible(m, served)
	r.checkAcked(e, m, now, start, count)
	r.checkPlaces(e, m, start, at)
	return r
}

// checkVisible checks every served entry against the model: no duplicate,
// nothing early, nothing never sent, corrupt, cancelled or at a wrong due
// time. It returns how often each ID was served and which ID each
// "topic/queue/offset" place holds.
func (r *report) checkVisible(m *model, served []servedEntry) (count map[message.ID]int, at map[string]message.ID) {
	count = map[message.ID]int{}
	at = map[string]message.ID{}
	firstAt := map[message.ID]servedEntry{}
	for _, v := range served {
		r.checkVisibleEntry(m, v, count, at, firstAt)
	}
	return count, at
}

// checkVisibleEntry checks one served entry v, counting it in count, at
// and firstAt.
func (r *report) checkVisibleEntry(m *model, v servedEntry, count map[message.ID]int, at map[string]message.ID, firstAt map[message.ID]servedEntry) {
	r.Visible++
	count[v.ID]++
	at[fmt.Sprintf("%s/%d/%d", v.topic, v.queue, v.Offset)] = v.ID
	if count[v.ID] == 1 {
		firstAt[v.ID] = v
	}
	if count[v.ID] == 2 {
		f := firstAt[v.ID]
		r.bad(&r.Duplicates, "%v visible twice: %s/%d/%d (due %d, visible %d) and %s/%d/%d (due %d, visible %d)", v.ID,
			f.topic, f.queue, f.Offset, f.Due, f.Visible.Visible, v.topic, v.queue, v.Offset, v.Due, v.Visible.Visible)
	}
	if v.Visible.Visible < v.Due {
		r.bad(&r.Early, "%v visible at %d before its due time %d", v.ID, v.Visible.Visible, v.Due)
	}
	x := m.msgs[v.ID]
	if x == nil {
		if m.maybe[string(v.Message.Body)] && v.Message.Topic == v.topic {
			r.UnackedVisible++
		} else {
			r.bad(&r.Phantom, "%v in %s/%d was never sent (body %q)", v.ID, v.topic, v.queue, v.Message.Body)
		}
		return
	}
	if string(v.Message.Body) != x.body || v.Message.Topic != x.topic || v.topic != x.topic || v.Message.Key != x.key {
		r.bad(&r.Corrupt, "%v serves topic %q key %q body %q, sent %q %q %q",
			v.ID, v.Message.Topic, v.Message.Key, v.Message.Body, x.topic, x.key, x.body)
	}
	if x.cancelled {
		r.bad(&r.CancelledVisible, "%v visible at %d after an acknowledged cancel", v.ID, v.Visible.Visible)
		return
	}
	switch {
	case x.possible(v.Due):
		if v.Visible.Visible < x.minDue() {
			r.bad(&r.Early, "%v visible at %d, due %d", v.ID, v.Visible.Visible, x.minDue())
		}
	case slices.Contains(x.oldDues, v.Due):
		r.bad(&r.OldTime, "%v visible at its old due time %d; rescheduled to %d", v.ID, v.Due, x.due)
	default:
		r.bad(&r.WrongDue, "%v visible with due %d; acknowledged due %d", v.ID, v.Due, x.due)
	}
}

// checkAcked checks every acknowledged message not served: retired only
// when long due, cancelled when the cancel was acknowledged, else pending
// with a possible due time (or due, but not yet visible, at now).
func (r *report) checkAcked(e checkTarget, m *model, now int64, start uint64, count map[message.ID]int) {
	for _, x := range m.order {
		if x.cancelled {
			r.Cancelled++
		}
		if _, err := e.Inspect(x.id); x.id.Pos < start && err != nil {
			// Retention removed its record (a record compaction moved is
			// still found): fine only if it was long visible.
			r.Retired++
			if !x.cancelled && !x.maybeCancelled && x.maxDue() > m.retiredBefore {
				r.bad(&r.Lost, "%v (due %d) removed by retention before %d", x.id, x.due, m.retiredBefore)
			}
			continue
		}
		if count[x.id] > 0 {
			continue
		}
		info, err := e.Inspect(x.id)
		switch {
		case err != nil:
			if x.cancelled {
				r.bad(&r.CancelLost, "%v cancelled, but inspect fails: %v", x.id, err)
			} else {
				r.bad(&r.Lost, "%v (due %d) is gone: %v", x.id, x.due, err)
			}
		case x.cancelled:
			if info.State != StateCancelled {
				r.bad(&r.CancelLost, "%v cancel acknowledged, but its state is %s (due %d)", x.id, info.State, info.Due)
			}
		case x.maybeCancelled && info.State == StateCancelled:
		case x.maxDue() <= now:
			r.bad(&r.Lost, "%v due %d not visible at %d (state %s, due %d)", x.id, x.due, now, info.State, info.Due)
		case info.State != StatePending && !(info.State == StateDue && x.minDue() <= now):
			r.bad(&r.Lost, "%v due %d is %s at %d", x.id, x.due, info.State, now)
		case !x.possible(info.Due):
			r.bad(&r.WrongDue, "%v pending with due %d; acknowledged due %d", x.id, info.Due, x.due)
		default:
			r.Pending++
		}
	}
}

// checkPlaces checks that every place read earlier still holds the same
// message and that every key not in doubt looks up its latest message.
func (r *report) checkPlaces(e checkTarget, m *model, start uint64, at map[string]message.ID) {
	for _, s := range m.seen {
		if s.id.Pos < start {
			continue
		}
		if got, ok := at[fmt.Sprintf("%s/%d/%d", s.topic, s.queue, s.offset)]; !ok || got != s.id {
			r.bad(&r.Moved, "%s/%d offset %d held %v when read, now %v", s.topic, s.queue, s.offset, s.id, got)
		}
	}
	for tk, k := range m.keys {
		if k.doubt || k.id.Pos < start {
			continue
		}
		topic, key, _ := strings.Cut(tk, "\x00")
		id, err := e.LookupKey(topic, key)
		if err != nil || id != k.id {
			r.bad(&r.KeyMiss, "key %s/%s: latest is %v, lookup gives %v %v", topic, key, k.id, id, err)
		}
	}
}
