package engine

import (
	"fmt"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/forecast"
)

// forecastState counts pending messages by due second, per topic and for
// all topics (package forecast), so that a forecast costs in proportion to
// its buckets, not to the pending messages.
//
// It is kept by the same apply paths that keep Stats.Pending: a message is
// added at its due time when its send is applied (applyMessageLocked),
// moved by a reschedule and taken out by a cancel (change), and taken out
// when it fires (applyFireLocked). During recovery it is off (Engine.fc is
// nil): replay alone does not see the messages pending before the
// checkpoint. At the end of recovery it is rebuilt from the timer buckets,
// counting the entries the loader would schedule (validLocked), which are
// exactly the pending messages at their effective due times.
//
// Invariant: all.Total() == Stats.Pending, and the per-topic totals equal
// the topics' pending counts. Lock order: Engine.mu, then mu; readers take
// only mu, so a forecast never waits for the engine's lock.
type forecastState struct {
	mu      sync.Mutex
	all     *forecast.Counts
	byTopic map[uint32]*forecast.Counts
}

func newForecastState() *forecastState {
	return &forecastState{all: forecast.New(), byTopic: map[uint32]*forecast.Counts{}}
}

// addLocked counts delta messages of topic tid due at the Unix ms due.
// Caller holds f.mu.
func (f *forecastState) addLocked(tid uint32, due, delta int64) {
	sec := forecast.SecondOf(due)
	f.all.Add(sec, delta)
	c := f.byTopic[tid]
	if c == nil {
		c = forecast.New()
		f.byTopic[tid] = c
	}
	c.Add(sec, delta)
	if c.Total() == 0 {
		delete(f.byTopic, tid)
	}
}

// forecastAddLocked counts a message sent to topic tid, due at due.
func (e *Engine) forecastAddLocked(tid uint32, due int64) {
	if f := e.fc; f != nil {
		f.mu.Lock()
		f.addLocked(tid, due, 1)
		f.mu.Unlock()
	}
}

// forecastChangeLocked moves a message of topic tid out of its bucket at
// due: cancelled, or rescheduled to newDue.
func (e *Engine) forecastChangeLocked(tid uint32, due int64, cancel bool, newDue int64) {
	if f := e.fc; f != nil {
		f.mu.Lock()
		f.addLocked(tid, due, -1)
		if !cancel {
			f.addLocked(tid, newDue, 1)
		}
		f.mu.Unlock()
	}
}

// forecastFiredLocked takes the messages of a fire out of their buckets.
func (e *Engine) forecastFiredLocked(batch []fireEntry) {
	if f := e.fc; f != nil {
		f.mu.Lock()
		for _, fe := range batch {
			f.addLocked(fe.topic, fe.due, -1)
		}
		f.mu.Unlock()
	}
}

// rebuildForecast counts the pending messages at the end of recovery, from
// the timer buckets: every entry the loader would schedule is a pending
// message at its effective due time (stale entries of rescheduled or
// cancelled messages, and those already visible, fail validLocked; Load
// drops duplicates). It reads every bucket once, one at a time.
func (e *Engine) rebuildForecast() error {
	f := newForecastState()
	for _, b := range e.disp.timers.Starts() {
		es, err := e.disp.timers.Load(b)
		if err != nil {
			return fmt.Errorf("count pending messages: timer bucket %s: %w", fmtMs(b), err)
		}
		for _, en := range es {
			if (en.Kind == kindMessage || en.Kind == kindWindowed) && e.validLocked(en.Pos, en.Due) {
				f.addLocked(en.Topic, en.Due, 1)
			}
		}
	}
	if n, want := f.all.Total(), e.stats.Pending.Load(); n != want {
		e.opts.Logger.Warn("forecast counts disagree with the pending count", "counted", n, "pending", want)
	}
	e.fc = f
	return nil
}

// Forecast counts the pending messages of topic ("" for every topic) that
// fall due in each bucket [start, start+step) from from to to (Unix ms).
// Counts are kept per second, so from is rounded down and to up to whole
// seconds; step must be whole seconds, at least one. At most
// forecast.MaxBuckets buckets. Overdue messages still waiting for dispatch
// count at their due time. The cost grows with the number of buckets (and
// the days they span), not with the number of pending messages.
func (e *Engine) Forecast(topic string, from, to int64, step time.Duration) ([]forecast.Bucket, error) {
	p, err := forecast.NewPlan(from, to, step)
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "%s", err.Error())
	}
	tid, err := e.forecastTopic(topic)
	if err != nil {
		return nil, err
	}
	f := e.fc
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.all
	if topic != "" {
		if c = f.byTopic[tid]; c == nil {
			c = forecast.New() // a topic with nothing pending
		}
	}
	return p.Run(c), nil
}

// forecastTopic returns the id of a topic ("" for all: 0).
func (e *Engine) forecastTopic(topic string) (uint32, error) {
	if topic == "" {
		return 0, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.cat.topicsByName[topic]
	if t == nil {
		return 0, errs.New(errs.NotFound, "topic %q does not exist", topic)
	}
	return t.id, nil
}

// DueWithin returns how many pending messages of every topic fall due
// within d from now, overdue ones still waiting for dispatch included.
func (e *Engine) DueWithin(d time.Duration) int64 {
	until := forecast.SecondOf(e.Now()+d.Milliseconds()) + 1
	f := e.fc
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.all.SumAll(until)
}
