package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

const markerTopic = "restart-marker"

// Keys of the two marker messages of the restart scenario.
const (
	markerBefore = "due-1s-before-reopen"
	markerAfter  = "due-1s-after-reopen"
)

// runRestart reopens a data directory, sends two markers, closes, and
// reopens once more at a chosen instant: one marker fell due 1 s before
// that reopen started (it fell due while the broker was down), the other
// is due 1 s after. It reports how long each Open took and when each
// marker became visible, counted from the start of the second Open.
func runRestart(c config, dir string) (*report, error) {
	r := newReport("restart", dir)
	opts := engineOptions(dir)
	u, err := walkDisk(dir)
	if err != nil {
		return nil, err
	}
	app, _ := u.total()
	r.note("data directory of %s (%s files), reopened after a clean Close (final checkpoint written)", mib(app), humanInt(int64(sumFiles(u))))

	t0 := time.Now()
	e, err := engine.Open(opts)
	if err != nil {
		return nil, err
	}
	open1 := time.Since(t0)
	st := e.Stats()
	pending := st.Pending.Load()
	r.fig("pending messages in the directory", humanInt(pending))
	r.figT("first Open: until Open returns", secs(open1), "< 5 s with 10 M pending")
	r.fig("first Open: Stats().RecoveryDuration()", fmt.Sprintf("%.3f s (%s log records replayed)", st.RecoveryDuration(), humanInt(int64(st.Replayed.Load()))))

	if err := e.CreateTopic(markerTopic, engine.TopicConfig{Queues: 1}); err != nil && errs.CodeOf(err) != errs.AlreadyExists {
		e.Close()
		return r, err
	}
	base := queueLen(e, markerTopic)
	reopenAt := e.Now() + c.marker.Milliseconds()
	_, err = e.SendBatch(bg, []engine.SendRequest{
		{Message: message.Message{Topic: markerTopic, Key: markerBefore}, When: message.When{At: reopenAt - 1000}},
		{Message: message.Message{Topic: markerTopic, Key: markerAfter}, When: message.When{At: reopenAt + 1000}},
	})
	if err != nil {
		e.Close()
		return r, err
	}
	cs := time.Now()
	if err := e.Close(); err != nil {
		return r, fmt.Errorf("close: %w", err)
	}
	r.fig("Close after the first Open", secs(time.Since(cs)))
	if time.Now().UnixMilli() >= reopenAt-1000 {
		return r, fmt.Errorf("Close ended after the first marker's due time; raise -marker (now %v)", c.marker)
	}
	time.Sleep(time.Until(time.UnixMilli(reopenAt)))

	t1 := time.Now()
	e, err = engine.Open(opts)
	if err != nil {
		return r, err
	}
	defer e.Close()
	open2 := time.Since(t1)
	st = e.Stats()
	r.figT("second Open: until Open returns", secs(open2), "< 5 s with 10 M pending")
	r.fig("second Open: Stats().RecoveryDuration()", fmt.Sprintf("%.3f s (%s log records replayed)", st.RecoveryDuration(), humanInt(int64(st.Replayed.Load()))))

	dueAt := map[string]time.Duration{
		markerBefore: time.UnixMilli(reopenAt - 1000).Sub(t1),
		markerAfter:  time.UnixMilli(reopenAt + 1000).Sub(t1),
	}
	seen := map[string]time.Duration{}
	late := map[string]int64{}
	off := base
	deadline := time.Now().Add(2*time.Minute + c.marker)
	for len(seen) < 2 {
		ch := e.VisibleSignal()
		vs, err := e.ReadQueue(markerTopic, 0, off, 16)
		if err != nil {
			return r, err
		}
		stamp := time.Since(t1)
		for _, v := range vs {
			seen[v.Message.Key] = stamp
			late[v.Message.Key] = v.Visible - v.Due
			off = v.Offset + 1
		}
		if len(vs) > 0 {
			continue
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			return r, errors.New("the markers did not become visible within 2 minutes of the reopen")
		}
	}
	for _, k := range []string{markerBefore, markerAfter} {
		r.fig("second Open: marker "+k+": due at, seen at", fmt.Sprintf("%+.3f s, %.3f s (index Visible - Due %d ms)",
			dueAt[k].Seconds(), seen[k].Seconds(), late[k]))
	}
	r.note("times of the second Open count from the call to engine.Open; a marker is \"seen\" when a reader waiting on VisibleSignal read it from the queue")
	return r, nil
}

func sumFiles(u diskUsage) int {
	n := 0
	for _, c := range components {
		n += u.files[c]
	}
	return n
}

// queueLen is the number of entries ever appended to a topic's queues.
func queueLen(e *engine.Engine, topic string) uint64 {
	for _, t := range e.Topics() {
		if t.Name == topic {
			var n uint64
			for _, l := range t.Lengths {
				n += l
			}
			return n
		}
	}
	return 0
}
