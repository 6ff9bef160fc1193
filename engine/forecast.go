package engine

import (
	"errors"
	"math"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/timerstore"
)

// forecastState counts pending messages by due second, per topic and for
// all topics (package forecast), so that a forecast costs in proportion to
// its buckets, not to the pending messages.
//
// It is kept by the same apply paths that keep Stats.Pending: a message is
// added at its due time when its send is applied (applyMessageLocked),
// moved by a reschedule and taken out by a cancel (change, and
// replayChangeLocked at recovery), and taken out when it fires
// (applyFireLocked). At recovery it starts from the checkpoint's pending
// messages, counted from the timer bucket entries while they are verified
// (startForecastLocked), and replay moves it on.
//
// Invariant: all.Total() == Stats.Pending, and the per-topic totals equal
// the topics' pending counts. Lock order: Engine.mu, then mu; readers take
// only mu, so a forecast never waits for the engine's lock.
type forecastState struct {
	mu      sync.Mutex
	all     *forecast.Counts
	byTopic map[uint32]*forecast.Counts
	recount *recount // while the checkpoint's timers are counted: see startForecastLocked
	// While the count of the checkpoint's timers runs in the background
	// (deferred, forecastrecount.go), the changes of the apply paths wait
	// in deltas, in order, and are applied after it, as if it had run
	// first; readers wait for ready, closed once the counts are whole (at
	// once when nothing is deferred), and readyErr says why they are not.
	deferred bool      // under mu
	deltas   []fcDelta // under mu
	job      *recountJob
	ready    chan struct{}
	readyErr error // set before ready is closed
}

// fcDelta is a change of the counts waiting for a deferred count.
type fcDelta struct {
	tid        uint32
	due, delta int64
}

func newForecastState() *forecastState {
	f := &forecastState{all: forecast.New(), byTopic: map[uint32]*forecast.Counts{}, ready: make(chan struct{})}
	close(f.ready)
	return f
}

// applyLocked is addLocked, or a delta kept for after a deferred count.
// Caller holds f.mu.
func (f *forecastState) applyLocked(tid uint32, due, delta int64) {
	if f.deferred {
		f.deltas = append(f.deltas, fcDelta{tid: tid, due: due, delta: delta})
		return
	}
	f.addLocked(tid, due, delta)
}

// wait waits until the counts are whole, and returns why they cannot be.
func (f *forecastState) wait() error {
	<-f.ready
	return f.readyErr
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

// sent counts a message sent to topic tid, due at due. Under Engine.mu;
// a nil f (before recovery starts counting) counts nothing.
func (f *forecastState) sent(tid uint32, due int64) {
	if f != nil {
		f.mu.Lock()
		f.applyLocked(tid, due, 1)
		f.mu.Unlock()
	}
}

// changed moves a message of topic tid out of its bucket at due:
// cancelled, or rescheduled to newDue. Under Engine.mu.
func (f *forecastState) changed(tid uint32, due int64, cancel bool, newDue int64) {
	if f != nil {
		f.mu.Lock()
		f.applyLocked(tid, due, -1)
		if !cancel {
			f.applyLocked(tid, newDue, 1)
		}
		f.mu.Unlock()
	}
}

// fired takes the messages of a fire out of their buckets. Under
// Engine.mu.
func (f *forecastState) fired(batch []fireEntry) {
	if f != nil {
		f.mu.Lock()
		for _, fe := range batch {
			f.applyLocked(fe.topic, fe.due, -1)
		}
		f.mu.Unlock()
	}
}

// startForecastLocked starts counting at recovery, before the timer
// buckets are verified: the counts begin as those of the checkpoint, built
// from the bucket entries the verification reads (countTimerLocked), and
// replay then moves them through the same hooks as the live path
// (applyMessageLocked, replayChangeLocked, applyFireLocked). The recovery
// filter is set here already, so that validLocked answers as of the
// checkpoint.
func (r *recovery) startForecastLocked(st *checkpointState) {
	r.side.fc = newForecastState()
	r.disp.setRecoveryFilter(st.LogPos, st.Frontier)
	r.side.fc.recount = &recount{seen: map[uint64]bool{}, byTopic: map[uint32]*[60]int64{}, minute: math.MinInt64,
		logStart: uint64(r.log.Start())}
}

// recount gathers recovery's count of the timer bucket entries a minute
// at a time: the entries of a bucket file share their minute (buckets are
// a minute wide by default), so each minute costs one update of the counts
// (Counts.AddMinute) rather than one per message.
type recount struct {
	seen     map[uint64]bool // rescheduled messages counted already
	logStart uint64          // the log's start: it does not move during recovery
	minute   int64           // the minute being gathered
	byTopic  map[uint32]*[60]int64
	topic    uint32     // the topic of cur
	cur      *[60]int64 // byTopic[topic], the last one used
}

// countTimerLocked counts one timer bucket entry of the checkpoint if it is
// a pending message at its effective due time: stale entries of rescheduled
// or cancelled messages and those already visible fail validLocked. A
// rescheduled message may have two identical entries (moved away and back);
// it counts once (only messages with an overlay entry can have them).
func (r *recovery) countTimerLocked(en timerstore.Entry) {
	rc := r.side.fc.recount
	if (en.Kind != kindMessage && en.Kind != kindWindowed) || !r.disp.validFromLocked(en.Pos, en.Due, rc.logStart) {
		return
	}
	if r.ovl.has(en.Pos) {
		if rc.seen[en.Pos] {
			return
		}
		rc.seen[en.Pos] = true
	}
	r.side.fc.gather(en)
}

// gather counts a timer entry that is a pending message into the minute
// being gathered.
func (f *forecastState) gather(en timerstore.Entry) {
	rc := f.recount
	sec := forecast.SecondOf(en.Due)
	mi := sec / 60
	if sec < 0 && sec%60 != 0 {
		mi--
	}
	if mi != rc.minute {
		f.flushRecount()
		rc.minute = mi
	}
	if rc.cur == nil || rc.topic != en.Topic {
		rc.topic, rc.cur = en.Topic, rc.byTopic[en.Topic]
		if rc.cur == nil {
			rc.cur = new([60]int64)
			rc.byTopic[en.Topic] = rc.cur
		}
	}
	rc.cur[sec-mi*60]++
}

// flushRecount adds the minute gathered to the counts. It takes f.mu: a
// deferred count runs beside the apply paths.
func (f *forecastState) flushRecount() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushRecountLocked()
}

// flushRecountLocked is flushRecount for a caller holding f.mu.
func (f *forecastState) flushRecountLocked() {
	rc := f.recount
	for tid, n := range rc.byTopic {
		f.all.AddMinute(rc.minute, n)
		c := f.byTopic[tid]
		if c == nil {
			c = forecast.New()
			f.byTopic[tid] = c
		}
		c.AddMinute(rc.minute, n)
		if c.Total() == 0 {
			delete(f.byTopic, tid)
		}
		*n = [60]int64{}
	}
}

// finishRecount ends recovery's counting of the buckets; called after the
// verification, before replay.
func (f *forecastState) finishRecount() {
	if f.recount != nil {
		f.flushRecount()
		f.recount = nil
	}
}

// total is the number of messages counted, of every topic.
func (f *forecastState) total() int64 { return f.all.Total() }

// Forecast counts the pending messages of topic ("" for every topic) that
// fall due in each bucket [start, start+step) from from to to (Unix ms).
// Counts are kept per second, so from is rounded down and to up to whole
// seconds; step must be whole seconds, at least one. At most
// forecast.MaxBuckets buckets. Overdue messages still waiting for dispatch
// count at their due time. The cost grows with the number of buckets (and
// the days they span), not with the number of pending messages. In the
// first seconds after a start it waits for the count of the pending
// messages, which runs after Open returns (forecastrecount.go); if that
// count failed, it is Unavailable.
func (e *Engine) Forecast(topic string, from, to int64, step time.Duration) ([]forecast.Bucket, error) {
	p, err := forecast.NewPlan(from, to, step)
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "%s", err.Error())
	}
	tid, err := e.cat.forecastTopic(topic)
	if err != nil {
		return nil, err
	}
	// The counts' lock is taken by sends and fires (under the engine's
	// lock): a plan of thousands of buckets is counted a slice at a time,
	// so that none of them waits for a whole forecast. The buckets of one
	// forecast may then see a send or a fire made between two slices, as
	// if taken a moment apart.
	const slice = 64
	out := make([]forecast.Bucket, p.N)
	f := e.side.fc
	if err := f.wait(); err != nil {
		return nil, errs.New(errs.Unavailable, "forecast: the pending messages could not be counted since the start: %v", err)
	}
	for i := 0; i < p.N; i += slice {
		f.mu.Lock()
		c := f.all
		if topic != "" {
			if c = f.byTopic[tid]; c == nil {
				c = noCounts // a topic with nothing pending
			}
		}
		p.RunInto(c, out, i, min(i+slice, p.N))
		f.mu.Unlock()
	}
	return out, nil
}

// noCounts is the counts of a topic with nothing pending; never written.
var noCounts = forecast.New()

// forecastTopic returns the id of a topic ("" for all: 0).
func (c *catalog) forecastTopic(topic string) (uint32, error) {
	if topic == "" {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.topic(topic)
	if t == nil {
		return 0, errs.New(errs.NotFound, "topic %q does not exist", topic)
	}
	return t.id, nil
}

// DueWithin returns how many pending messages of every topic fall due
// within d from now, overdue ones still waiting for dispatch included. In
// the first seconds after a start it waits for the count of the pending
// messages (forecastrecount.go), and it is 0 if that count failed.
func (e *Engine) DueWithin(d time.Duration) int64 {
	until := forecast.SecondOf(e.Now()+d.Milliseconds()) + 1
	f := e.side.fc
	if f.wait() != nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.all.SumAll(until)
}

// The recovery steps of the count deferred until after Open
// (forecastrecount.go).

// deferRecount sets the forecast up to be counted after Open from plan
// (the runs the checkpoint listed), on a copy of what validity depends on
// now, before replay; startForecastLocked has set the recovery filter.
func (r *recovery) deferRecount(plan *timerstore.RunsPlan) {
	reloc, _, _ := r.segs.captureLocked()
	fired, recL, recF := r.disp.recoveryFilterCopy()
	f := r.side.fc
	f.job = &recountJob{plan: plan, filter: &recountFilter{
		logStart: f.recount.logStart, reloc: reloc, ovl: r.ovl.copyEntries(),
		firedSince: fired, recL: recL, recF: recF,
	}}
	f.deferred = true
	f.ready = make(chan struct{})
}

// startRecount starts the count run deferred, if it deferred one, once
// Open has nothing left to do. When Close begins, the count stops at its
// next read, and Close waits for forecastState.ready; damage the count
// finds stops the engine (dispatcher.timerIndexDamagedLocked).
func (r *recovery) startRecount() {
	f := r.side.fc
	if f.job == nil {
		return
	}
	job := f.job
	f.job = nil
	stop := r.disp.stopping()
	gate := r.opts.recountGate
	go func() {
		if gate != nil {
			select {
			case <-gate:
			case <-stop:
			}
		}
		err := job.plan.Each(func(en timerstore.Entry) { job.count(f, en) }, func(int) error {
			select {
			case <-stop:
				return errRecountStopped
			default:
				return nil
			}
		})
		r.finishRecount(err)
	}()
}

// finishRecount ends a deferred count: it adds the last minute, applies
// the changes that waited, in order, and lets readers in. A count that
// failed leaves the counts as they are and says why to readers; damage in
// the timer index stops the engine (the next start rebuilds the index,
// whose directory now holds a damage mark).
func (r *recovery) finishRecount(err error) {
	f := r.side.fc
	r.mu.Lock()
	f.mu.Lock()
	if err == nil {
		f.flushRecountLocked()
	}
	f.recount = nil
	for _, d := range f.deltas {
		if err == nil {
			f.addLocked(d.tid, d.due, d.delta)
		}
	}
	f.deltas, f.deferred, f.readyErr = nil, false, err
	if err == nil {
		if n, want := f.all.Total(), r.stats.Pending.Load(); n != want {
			r.opts.Logger.Warn("forecast counts disagree with the pending count", "counted", n, "pending", want)
		}
	}
	f.mu.Unlock()
	if errors.Is(err, timerstore.ErrCorrupt) {
		r.disp.timerIndexDamagedLocked(err)
	} else if err != nil && !errors.Is(err, errRecountStopped) {
		r.opts.Logger.Error("the pending messages could not be counted for the forecast", "err", err)
	}
	r.mu.Unlock()
	close(f.ready)
}
