package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// The checker is the oracle of every crash test: a counter that can never
// fire would let a whole class of bugs through all of them. This self-test
// feeds it a fake broker that serves a fixed ledger correctly, then breaks
// the fake in one way at a time and requires that exactly the counter
// named for that misbehaviour fires, and nothing else.

// fakeBroker serves checkTarget from plain maps.
type fakeBroker struct {
	queues  map[string][][]Visible // topic -> queue -> entries in offset order
	infos   map[message.ID]Info
	keys    map[string]message.ID // topic + "\x00" + key
	start   uint64
	readErr error
}

func (f *fakeBroker) Topics() []TopicInfo {
	var out []TopicInfo
	for name, qs := range f.queues {
		out = append(out, TopicInfo{Name: name, Queues: len(qs)})
	}
	return out
}

func (f *fakeBroker) ReadQueue(topic string, queue int, from uint64, max int) ([]Visible, error) {
	if f.readErr != nil {
		return nil, f.readErr
	}
	qs := f.queues[topic]
	if queue >= len(qs) || from >= uint64(len(qs[queue])) {
		return nil, nil
	}
	es := qs[queue][from:]
	return es[:min(len(es), max)], nil
}

func (f *fakeBroker) Inspect(id message.ID) (Info, error) {
	in, ok := f.infos[id]
	if !ok {
		return Info{}, errs.New(errs.NotFound, "message %s does not exist", id)
	}
	return in, nil
}

func (f *fakeBroker) LookupKey(topic, key string) (message.ID, error) {
	id, ok := f.keys[topic+"\x00"+key]
	if !ok {
		return message.ID{}, errs.New(errs.NotFound, "no message with key %q", key)
	}
	return id, nil
}

func (f *fakeBroker) logStart() uint64 { return f.start }

// The ledger of the self-test, checked at selfNow. In words: A (key k) is
// due at 5000 and visible; B is due at 20000 and pending; C was due at
// 8000 and cancelled; D was sent for 15000 and rescheduled to 7000, and is
// visible; E was sent in doubt (the client never heard back) and is
// visible. A consumer saw A at offset 0 of t/0.
const selfNow = 10000

var (
	selfA = message.ID{Tag: 7, Pos: 100}
	selfB = message.ID{Tag: 7, Pos: 200}
	selfC = message.ID{Tag: 7, Pos: 300}
	selfD = message.ID{Tag: 7, Pos: 400}
	selfE = message.ID{Tag: 7, Pos: 500}
	selfX = message.ID{Tag: 7, Pos: 600} // never sent
)

func selfLedger() []event {
	return []event{
		{kind: evSend, state: evAcked, id: selfA, topic: "t", key: "k", body: "a", due: 5000},
		{kind: evSend, state: evAcked, id: selfB, topic: "t", body: "b", due: 20000},
		{kind: evSend, state: evAcked, id: selfC, topic: "t", body: "c", due: 8000},
		{kind: evSend, state: evAcked, id: selfD, topic: "t", body: "d", due: 15000},
		{kind: evCancel, state: evAcked, id: selfC},
		{kind: evResched, state: evAcked, id: selfD, due: 7000},
		{kind: evSend, state: evDoubt, topic: "t", body: "e"},
		{kind: evSeen, state: evAcked, id: selfA, topic: "t", queue: 0, offset: 0},
	}
}

func selfVisible(id message.ID, off uint64, due, vis int64, key, body string) Visible {
	return Visible{ID: id, Offset: off, Due: due, Visible: vis,
		Message: &message.Stored{Message: message.Message{Topic: "t", Key: key, Body: []byte(body)}, Due: due}}
}

// selfBroker is a fake that serves the ledger correctly.
func selfBroker() *fakeBroker {
	return &fakeBroker{
		queues: map[string][][]Visible{"t": {{
			selfVisible(selfA, 0, 5000, 5000, "k", "a"),
			selfVisible(selfD, 1, 7000, 7003, "", "d"), // 3 ms late: allowed
			selfVisible(selfE, 2, 9000, 9000, "", "e"),
		}}},
		infos: map[message.ID]Info{
			selfA: {ID: selfA, State: StateVisible, Topic: "t", Due: 5000},
			selfB: {ID: selfB, State: StatePending, Topic: "t", Due: 20000},
			selfC: {ID: selfC, State: StateCancelled, Topic: "t", Due: 8000},
			selfD: {ID: selfD, State: StateVisible, Topic: "t", Due: 7000},
			selfE: {ID: selfE, State: StateVisible, Topic: "t", Due: 9000},
		},
		keys: map[string]message.ID{"t\x00k": selfA},
	}
}

func TestCheckerSelfTest(t *testing.T) {
	m := buildModel(selfLedger())
	if rep := checkServed(selfBroker(), m, selfNow); rep.failures() != 0 || rep.Visible != 3 || rep.Pending != 1 ||
		rep.Cancelled != 1 || rep.UnackedVisible != 1 {
		t.Fatalf("the checker faults a correct broker: %s", rep)
	}
	q := func(f *fakeBroker) *[]Visible { return &f.queues["t"][0] }
	cases := []struct {
		name    string
		counter func(*report) int
		breakIt func(f *fakeBroker)
	}{
		{"lost: an acknowledged due message is not visible", func(r *report) int { return r.Lost },
			func(f *fakeBroker) { *q(f) = slices.Delete(*q(f), 1, 2) }},
		{"lost: an acknowledged pending message is gone", func(r *report) int { return r.Lost },
			func(f *fakeBroker) { delete(f.infos, selfB) }},
		{"lost: a due message still pending", func(r *report) int { return r.Lost },
			func(f *fakeBroker) {
				*q(f) = slices.Delete(*q(f), 1, 2)
				f.infos[selfD] = Info{ID: selfD, State: StatePending, Topic: "t", Due: 7000}
			}},
		{"early: visible before its due time", func(r *report) int { return r.Early },
			func(f *fakeBroker) { *q(f) = append(*q(f), selfVisible(selfB, 3, 20000, 9999, "", "b")) }},
		{"early: visible before the due time it reports is right", func(r *report) int { return r.Early },
			func(f *fakeBroker) { (*q(f))[1].Visible = 6999 }},
		{"duplicate: the same message at two offsets", func(r *report) int { return r.Duplicates },
			func(f *fakeBroker) { *q(f) = append(*q(f), selfVisible(selfA, 3, 5000, 5000, "k", "a")) }},
		{"cancelled-visible: a cancelled message delivered", func(r *report) int { return r.CancelledVisible },
			func(f *fakeBroker) { *q(f) = append(*q(f), selfVisible(selfC, 3, 8000, 8000, "", "c")) }},
		{"cancel-lost: an acknowledged cancel forgotten", func(r *report) int { return r.CancelLost },
			func(f *fakeBroker) { f.infos[selfC] = Info{ID: selfC, State: StatePending, Topic: "t", Due: 8000} }},
		{"wrong due: visible with a due time nobody gave", func(r *report) int { return r.WrongDue },
			func(f *fakeBroker) { (*q(f))[0].Due, (*q(f))[0].Visible = 6000, 6000 }},
		{"wrong due: pending with a due time nobody gave", func(r *report) int { return r.WrongDue },
			func(f *fakeBroker) { f.infos[selfB] = Info{ID: selfB, State: StatePending, Topic: "t", Due: 21000} }},
		{"old time: visible at the due time a reschedule replaced", func(r *report) int { return r.OldTime },
			func(f *fakeBroker) { (*q(f))[1].Due, (*q(f))[1].Visible = 15000, 15000 }},
		{"phantom: a message nobody sent", func(r *report) int { return r.Phantom },
			func(f *fakeBroker) { *q(f) = append(*q(f), selfVisible(selfX, 3, 9000, 9000, "", "x")) }},
		{"corrupt: other bytes than were sent", func(r *report) int { return r.Corrupt },
			func(f *fakeBroker) { (*q(f))[1].Message.Body = []byte("D") }},
		{"moved: a seen entry at another offset", func(r *report) int { return r.Moved },
			func(f *fakeBroker) {
				(*q(f))[0], (*q(f))[1] = (*q(f))[1], (*q(f))[0]
				(*q(f))[0].Offset, (*q(f))[1].Offset = 0, 1
			}},
		{"key-miss: lookup gives another message", func(r *report) int { return r.KeyMiss },
			func(f *fakeBroker) { f.keys["t\x00k"] = selfD }},
		{"unreadable: a queue cannot be read", func(r *report) int { return r.Unreadable },
			func(f *fakeBroker) { f.readErr = errors.New("injected read error") }},
		{"lost: retention removed a message not yet due", func(r *report) int { return r.Lost },
			func(f *fakeBroker) { f.start = 250; delete(f.infos, selfB) }},
	}
	for _, c := range cases {
		f := selfBroker()
		c.breakIt(f)
		rep := checkServed(f, buildModel(selfLedger()), selfNow)
		n := c.counter(rep)
		if n == 0 || rep.failures() != n {
			t.Errorf("%s: want that counter alone to fire, got %s", c.name, rep)
		} else {
			t.Logf("%s: %s", c.name, firstProblem(rep))
		}
	}
}

func firstProblem(r *report) string {
	if len(r.problems) == 0 {
		return "(no text)"
	}
	return fmt.Sprint(r.problems[0])
}
