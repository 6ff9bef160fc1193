package engine

import (
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/timewheel"
)

// dispatcher owns everything between a timer and its fire record: the
// on-disk buckets, the in-memory wheel of the near window, the heap of due
// messages, the rate limiter and the batch being fired. Guarded by
// Engine.mu. Its fields are its own (ownership_test.go): the rest of the
// engine asks it through its methods.
type dispatcher struct {
	// What it is given at Open, and the parts it asks (through their
	// methods): it calls no part that calls it (partgraph_test.go).
	mu          *sync.Mutex   // the engine's lock, for the bucket loads' goroutines and frontier
	opts        *Options      // the engine's options, read-only after Open
	clock       *clock.Broker // the broker clock
	log         *commitlog.Log
	stats       *Stats
	life        *lifecycle
	segs        *segTable
	ovl         *overlayState
	timers      *timerstore.Store
	spillOff    bool                       // recovery stopped writing timers out (spillTimers)
	wheel       *timewheel.Wheel[timerRef] // message timers, expired up to stageAhead early
	leases      *timewheel.Wheel[timerRef] // lease and retry timers, expired at their time
	near        nearIndex                  // message timers in the wheel or staged, by pos (dueSet, near.go)
	taken       map[uint64]struct{}        // positions taken for the fire record being written (dueSet)
	free        []*wheelTimer              // recycled timers
	loadedUntil int64                      // buckets starting before this are in the wheel
	lastAdvance int64                      // message wheel time: every timer due <= this has left it
	advancing   bool                       // the last AdvanceN of the message wheel stopped on its budget
	leaseAt     int64                      // lease wheel time, never past the broker clock
	leasing     bool                       // the last AdvanceN of the lease wheel stopped on its budget
	due         dueSet                     // staged and due, waiting for a fire record, per topic
	load        *bucketLoad                // the bucket being loaded, if any (dispatch.go)
	loadRetryAt int64                      // no bucket load before this (after a read error)
	fireRetryAt int64                      // no fire before this (after a failed fire record)
	fireBackoff int64                      // ms, doubled by each failed fire in a row, 0 after one that succeeds
	inflight    []fireEntry                // in the fire record being written
	// spare is the fire batches' buffer while no fire is in flight: a fire
	// takes it (takeBatchLocked) and gives it back once applied or put
	// back (recycleBatchLocked). A batch is made for up to a full batch
	// (or the whole staged heap, if smaller), most of it not due yet, so
	// a buffer made per fire was 15 % of what a steady stream of small
	// fires allocated.
	spare     []fireEntry
	fires     sync.WaitGroup // the fire in flight, if any (not under mu)
	batchRamp int            // the next fire batch's bound since the dispatcher was idle (batchSizeLocked)
	tokens    float64        // dispatch rate limiter
	tokensAt  int64
	// Recovery filter: entries registered before recL and due at or
	// before recF are visible already; firedSince lists positions made
	// visible by fire records replayed after recL.
	recL         uint64
	recF         int64
	firedSince   map[uint64]bool
	firedSinceTo int64
	replayHWM    int64 // latest broker time a replayed record carries
}

// newDispatcher makes the dispatcher of the engine whose lock, options,
// clock, log and stats are given, over the parts it asks.
func newDispatcher(mu *sync.Mutex, opts *Options, clk *clock.Broker, log *commitlog.Log, stats *Stats,
	life *lifecycle, segs *segTable, ovl *overlayState) *dispatcher {
	return &dispatcher{
		mu: mu, opts: opts, clock: clk, log: log, stats: stats, life: life, segs: segs, ovl: ovl,
		near: newNearIndex(), taken: map[uint64]struct{}{}, firedSince: map[uint64]bool{},
	}
}

// pushDispatchLocked stages a message timer that is not in the wheel in
// its topic's due heap; it fires once it is due (and within the rate),
// unless a change makes its entry stale first (dueSet).
func (d *dispatcher) pushDispatchLocked(ref timerRef) {
	t := d.newTimerLocked(ref)
	d.near.put(ref.pos, t)
	d.due.stage(t)
}

// stagedLocked reports whether the message at pos is staged: in a due heap
// before its time, not yet taken for a fire record. It is still pending.
func (d *dispatcher) stagedLocked(pos uint64, timer int64) bool {
	t := d.near.get(pos)
	return t != nil && !t.Scheduled() && timer > d.clock.Now()
}

// takenLocked reports whether the message at pos was taken for the fire
// record being written.
func (d *dispatcher) takenLocked(pos uint64) bool {
	_, ok := d.taken[pos]
	return ok
}

// validLocked reports whether a timer loaded from a bucket should fire:
// its record still exists, it was not cancelled, moved or fired, and it is
// not one the recovery filter knows to be visible already.
func (d *dispatcher) validLocked(pos uint64, due int64) bool {
	return d.validFromLocked(pos, due, uint64(d.log.Start()))
}

// validFromLocked is validLocked with the log's start given, for a caller
// that checks millions of entries while the log cannot shrink (recovery).
func (d *dispatcher) validFromLocked(pos uint64, due int64, logStart uint64) bool {
	if d.segs.physLocked(pos) < logStart || d.near.has(pos) || d.takenLocked(pos) {
		return false
	}
	if ov := d.ovl.get(pos); ov != nil {
		return !ov.Changing && !ov.Cancelled && !ov.Fired && ov.Due == due
	}
	return !d.firedAtRecoveryLocked(pos, due)
}

// expireLocked is the message wheel's fire callback: it stages the
// message, maybe before its time (stageAhead). The timer stays in near:
// staging a herd touches no map, which was most of its cost.
func (d *dispatcher) expireLocked(t *wheelTimer) {
	d.due.stage(t)
}

// expireLeaseLocked is the lease wheel's fire callback: it recycles the
// timer and hands what it was started with to ended, which the engine
// gives (advanceLocked): the dispatcher does not know who started it.
func (d *dispatcher) expireLeaseLocked(t *wheelTimer, ended func(timerRef)) {
	ref := t.Value
	d.recycleTimerLocked(t)
	ended(ref)
}

// newTimerLocked returns a recycled or new wheel timer.
func (d *dispatcher) newTimerLocked(ref timerRef) *wheelTimer {
	var t *wheelTimer
	if n := len(d.free); n > 0 {
		t = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		t = &wheelTimer{}
	}
	t.Value = ref
	return t
}

// recycleTimerLocked gives back a timer that is in no wheel and no map.
func (d *dispatcher) recycleTimerLocked(t *wheelTimer) {
	t.Value = timerRef{}
	if len(d.free) < freeKeep {
		d.free = append(d.free, t)
	}
}

// addWheelLocked schedules a lease or retry timer in the lease wheel; one
// already due fires at the next tick.
func (d *dispatcher) addWheelLocked(ref timerRef) *wheelTimer {
	if ref.due <= d.leaseAt {
		ref.due = d.leaseAt + 1
	}
	t := d.newTimerLocked(ref)
	d.leases.Add(t, ref.due)
	return t
}

// takeBatchLocked takes the next fire batch from the dispatch heap, within
// the rate limit: messages due at now and not after the message wheel's
// time, since every timer still in the wheel is due after that: so messages
// leave in due order even when the wheel lags (FIFO topics rely on it).
func (d *dispatcher) takeBatchLocked(now int64) []fireEntry {
	upTo := min(now, d.lastAdvance)
	if !d.due.ready(upTo) {
		d.batchRamp = 0 // idle: the next batch starts small again
		return nil
	}
	if len(d.inflight) > 0 || now < d.fireRetryAt {
		return nil // a fire in flight (one at a time), or a pause after a failed one
	}
	n := d.batchSizeLocked(upTo)
	if d.opts.DispatchRate > 0 {
		rate := float64(d.opts.DispatchRate)
		d.tokens += float64(now-d.tokensAt) * rate / 1000
		d.tokensAt = now
		if burst := d.rateBurst(); d.tokens > burst {
			d.tokens = burst
		}
		if int(d.tokens) < n {
			n = int(d.tokens)
		}
	}
	n = min(n, d.due.len())
	if n <= 0 {
		return nil
	}
	buf := d.spare
	d.spare = nil
	if cap(buf) < n {
		buf = make([]fireEntry, 0, n)
	}
	batch := d.due.take(n, upTo, &d.near, d.taken, d.recycleTimerLocked, buf[:0])
	if d.opts.DispatchRate > 0 {
		d.tokens -= float64(len(batch))
	}
	if len(batch) == 0 {
		d.spare = buf
		return nil // only stale entries were due
	}
	d.inflight = batch
	return batch
}

// rateBurst is the token bucket's depth: dispatchBurstMs of DispatchRate,
// and never less than one full fire batch. So a rate under 40,960/s bounds
// a herd only past its first DispatchBatch (README says so). A shallower
// bucket was tried: under a virtual clock, whose time moves only by
// advances, an advance then made only a tenth of the rate visible and
// never settled, since tokens accrue in broker time and the bucket caps
// what a jump brings.
func (d *dispatcher) rateBurst() float64 {
	return max(float64(d.opts.DispatchBatch), float64(d.opts.DispatchRate)*dispatchBurstMs/1000)
}

// frontierLocked is the fire frontier: every timer due at or before it has
// been made visible. It is never past the broker clock, though the wheel
// is (stageAhead): recovery raises the clock to the checkpoint's frontier.
func (d *dispatcher) frontierLocked() int64 {
	f := min(d.lastAdvance, d.clock.Now())
	if first, ok := d.due.min(); ok && first-1 < f {
		f = first - 1
	}
	if ld := d.load; ld != nil {
		// Timers added while their bucket loads are not in the wheel yet.
		for _, r := range ld.delta {
			f = min(f, r.due-1)
		}
	}
	for _, fe := range d.inflight {
		if fe.due-1 < f {
			f = fe.due - 1
		}
	}
	return f
}

// frontier is frontierLocked for a caller that does not hold mu.
func (d *dispatcher) frontier() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.frontierLocked()
}

// waitLocked says how long the loop may sleep.
func (d *dispatcher) waitLocked(now int64) time.Duration {
	next := d.loadedUntil - d.opts.Lookahead.Milliseconds()
	if d, ok := d.wheel.NextDeadline(); ok && d-stageAhead < next {
		next = d - stageAhead
	}
	if d, ok := d.leases.NextDeadline(); ok && d < next {
		next = d
	}
	if first, ok := d.due.nextAfter(now); ok && first < next {
		next = first // a staged message falls due (see nextAfter)
	}
	if d.due.ready(now) {
		ms, ok := d.tokenWaitLocked(now)
		switch {
		case now < d.fireRetryAt && len(d.inflight) == 0:
			// After a failed fire: tokens or not, the next one waits for
			// the pause's end.
			next = min(next, max(d.fireRetryAt, now+ms))
		case ok && now+ms < next:
			next = now + ms
		}
	}
	wait := time.Duration(next-now) * time.Millisecond
	if wait < time.Millisecond {
		wait = time.Millisecond
	}
	if wait > time.Second {
		// Wake at least once a second to notice wall-clock steps.
		wait = time.Second
	}
	return wait
}

// tokenWaitLocked says, while messages are due, in how many ms the loop
// must wake to take the next fire batch: when enough tokens for a useful
// batch have accrued (at least 1 ms). A useful batch is a full one while
// one topic has messages due, and firstBatch while several have (see
// tokenWantLocked). It need not wake (false) while a fire is in flight, since
// the fire's goroutine kicks the loop when done (one fire at a time), nor
// without a rate. Before, a full bucket made the wait negative and the
// loop woke every millisecond of a herd's fires, taking the engine's lock
// each time for nothing.
func (d *dispatcher) tokenWaitLocked(now int64) (int64, bool) {
	if len(d.inflight) > 0 || d.opts.DispatchRate <= 0 {
		return 0, false
	}
	need := float64(d.tokenWantLocked(now)) - d.tokens
	return max(1, int64(need*1000/float64(d.opts.DispatchRate))+1), true
}

// advanceLocked advances the wheels by a bounded step: the lease wheel
// towards now, the message wheel towards now + stageAhead (its timers are
// staged, not fired: see dispatch.go). The message wheel never passes a
// timer bucket that is not in the wheel yet: while a bucket loads it stops
// short of it (see bucketLoad), and otherwise short of loadedUntil, which is
// behind now only until the loop's next turn starts the next load (after
// one ended, or after a failed read, whose bucket is retried). Past either,
// the fire frontier would vouch for timers still in their bucket files, and
// recovery would skip them as visible. It returns whether expired timers
// are left for the next step. A lease or retry timer that ends is handed
// to leaseEnded.
func (d *dispatcher) advanceLocked(now int64, leaseEnded func(timerRef)) bool {
	more := false
	if now > d.leaseAt || d.leasing {
		to := max(now, d.leaseAt)
		_, d.leasing = d.leases.AdvanceN(to, expireChunk, func(t *wheelTimer) { d.expireLeaseLocked(t, leaseEnded) })
		if !d.leasing {
			d.leaseAt = to
		}
		more = d.leasing
	}
	to := min(now+stageAhead, d.loadedUntil-1)
	if d.load != nil {
		to = min(to, d.load.bucket-1)
	}
	if to <= d.lastAdvance && !d.advancing {
		return more
	}
	to = max(to, d.lastAdvance)
	_, d.advancing = d.wheel.AdvanceN(to, expireChunk, d.expireLocked)
	if !d.advancing {
		d.lastAdvance = to
	}
	return more || d.advancing
}

// addTimerLocked adds a timer to the timer index (the next checkpoint
// makes it durable) and, if its bucket is already in the wheel, schedules
// it there too.
func (d *dispatcher) addTimerLocked(ref timerRef) {
	d.timers.Add(timerstore.Entry{Due: ref.due, Pos: ref.pos, Topic: ref.topic, Queue: ref.queue, Kind: ref.timerKind()})
	d.placeTimerLocked(ref)
	if d.timers.Buffered() >= timerstore.FlushThreshold {
		d.life.askCheckpoint()
	}
}

// placeTimerLocked puts a timer whose entry is in its bucket where the
// dispatcher will find it: in the wheel if its bucket is loaded, in the
// delta of a load in progress if its bucket is loading (dispatch.go), or
// nowhere yet (its bucket will be loaded).
func (d *dispatcher) placeTimerLocked(ref timerRef) {
	switch ld := d.load; {
	case ref.due < d.loadedUntil:
		d.scheduleLocked(ref)
	case ld != nil && ref.due < ld.end:
		ld.delta = append(ld.delta, ref)
	}
}

// scheduleLocked puts a timer in the wheel, or stages it straight in the
// dispatch heap when the wheel has already passed its due time or it is due
// within stageAhead: then a wheel busy with a herd's tick does not hold it
// (takeBatchLocked keeps due order against what is still in the wheel).
func (d *dispatcher) scheduleLocked(ref timerRef) {
	if ref.due <= d.lastAdvance || ref.due <= d.clock.Now()+stageAhead {
		d.pushDispatchLocked(ref)
		return
	}
	t := d.newTimerLocked(ref)
	d.wheel.Add(t, ref.due)
	d.near.put(ref.pos, t)
}

// firedAtRecoveryLocked reports whether recovery knows the message at pos,
// whose timer is at timer and has no overlay entry, to have fired before
// the restart: the rule by which the loader skips its bucket entry
// (validFromLocked). After a restart the buckets load again from the
// earliest replayed due time, which may lie far behind messages that have
// fired; until their bucket is loaded, "timer at or after loadedUntil" does
// not mean pending for them.
func (d *dispatcher) firedAtRecoveryLocked(pos uint64, timer int64) bool {
	return d.firedSince[pos] || timer <= d.recF && pos < d.recL
}

// The pause after a failed fire record, in ms: it doubles with each
// failure in a row, from fireBackoffMin up to fireBackoffMax.
const (
	fireBackoffMin = 100
	fireBackoffMax = 5000
)

// fireFailedLocked puts back a batch whose fire record failed; it is
// retried after a pause. Nothing is lost: the timers are still in their
// buckets and the log.
func (d *dispatcher) fireFailedLocked(batch []fireEntry) {
	d.inflight = nil
	for _, fe := range batch {
		delete(d.taken, fe.pos)
		d.pushDispatchLocked(timerRef{pos: fe.pos, due: fe.due, topic: fe.topic, queue: fe.queue, windowed: fe.windowed})
	}
	// Pause before the next fire, longer after each failure in a row:
	// not a token debt, which at a low rate stalled dispatch for
	// DispatchBatch/rate seconds after one failure, and without a rate
	// was no pause at all (a full disk logged thousands of failures a
	// second).
	d.fireBackoff = min(max(2*d.fireBackoff, fireBackoffMin), fireBackoffMax)
	d.fireRetryAt = d.clock.Now() + d.fireBackoff
}

// recycleBatchLocked takes back the buffer of a fire that has ended
// (applied, or its entries put back after a failed write): nothing holds
// a fire batch after that, and spare is empty while a fire is in flight
// (takeBatchLocked took it).
func (d *dispatcher) recycleBatchLocked(batch []fireEntry) { d.spare = batch[:0] }

// fireWrittenLocked ends the fire in flight once its record is durable;
// its entries leave taken as they are applied (firedLocked).
func (d *dispatcher) fireWrittenLocked() {
	d.inflight = nil
	d.fireBackoff = 0
}

// firedLocked ends the fire of the message at pos: it was taken for the
// fire record now applied (live), or is not held at all (replay).
func (d *dispatcher) firedLocked(pos uint64) { delete(d.taken, pos) }

// goFire runs a fire beside the loop (one at a time: takeBatchLocked).
func (d *dispatcher) goFire(fire func()) {
	d.fires.Add(1)
	go func() {
		defer d.fires.Done()
		fire()
	}()
}

// waitFires waits for the fire in flight, if any. Not under mu.
func (d *dispatcher) waitFires() { d.fires.Wait() }

// leaseTimeLocked is the lease wheel's time, or the broker clock if ahead:
// the base of lease deadlines.
func (d *dispatcher) leaseTimeLocked() int64 {
	return max(d.leaseAt, d.clock.Now())
}
