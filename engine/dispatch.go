package engine

import (
	"errors"
	"fmt"

	"github.com/hourglass-mq/hourglass/timerstore"
)

// The dispatcher's herd handling. A herd (a million messages due at one
// millisecond) must block no one: not the sends, fires and acks that need
// the engine's lock, not the first message of the herd, and not a message of
// another topic due just after it. So every step that is proportional to a
// herd is done in bounded chunks, with the lock released between them:
//
//   - a timer bucket is read and decoded by a goroutine of its own, without
//     the lock (bucketLoad), and its entries enter the wheel loadChunk at a
//     time, one chunk per turn of the loop;
//   - the wheel expires at most expireChunk timers per turn (AdvanceN);
//   - the message wheel is expired up to stageAhead before its time: a
//     timer leaves it into its topic's due heap (staged) early, and a fire
//     batch takes only what is due. So a herd's per-timer work is done
//     before its instant, and a later tick (another topic's message due
//     just after the herd) is never stuck behind a herd's tick still being
//     expired. A staged message is still pending: Cancel and Reschedule
//     invalidate its heap entry (see dueSet), and the fire frontier stays
//     below it;
//   - due messages wait in one heap per topic (dueSet), and each fire batch
//     takes from the topics in turn, so a topic's herd takes only its share
//     of the dispatch rate while other topics have messages due;
//   - a fire batch is small when it matters (batchSizeLocked): the first
//     after an idle spell starts at firstBatch and doubles, so the first
//     message of a herd does not wait for a fire record of thousands, and
//     while several topics have messages due a batch is at most a quarter
//     of DispatchBatch, so a message of another topic waits behind short
//     fires only.

// Work done per turn of the loop while holding the engine's lock, so that
// sends, fires and readers wait at most that long for the lock while a
// herd is loaded or staged ahead of its instant. Staging costs about 0.1 us
// a timer (the wheel's unlink and an append to the topic's due queue, no
// map update; see dispatchHeap), so an expiry turn holds the lock well
// under 1 ms.
const (
	loadChunk   = 4096
	expireChunk = 2048
)

// stageAhead is how far ahead of the broker clock, in ms, the message
// wheel is expired into the due heaps. It bounds what a staged herd costs
// in memory (the heaps hold what falls due in the next stageAhead) and must
// exceed the time to expire a herd (about 1 s per million on 2 cores) for
// the herd to be staged in full by its instant.
const stageAhead = 3000

// dueSet holds the staged and due messages, one heap per topic, and takes
// fire batches fairly across topics. Within a topic, messages leave in due
// order, ties in send order (FIFO topics rely on it).
//
// Every message timer the dispatcher holds until its fire is in one index,
// near, by pos (a map of log pages: near.go), and its wheelTimer says
// where it is:
//
//	in the wheel   t.Scheduled()
//	staged or due  !t.Scheduled(): the heap entry with seq t.Value.seq is live
//
// Once taken for a fire record, a message leaves near for taken, a set no
// larger than one batch (so the fire's apply touches a small map, not the
// herd's), and fireEntry carries what its timer held.
//
// Staging (the wheel's expiry) touches no map: stage sets the timer's
// generation and pushes an entry; take looks the timer up, while its slot
// is in the cache deletes it from near, and adds its pos to taken. An
// entry whose generation differs from its timer's, or whose timer is gone,
// is stale: Cancel and Reschedule remove or replace the
// timer, and a failed fire's retry stages it again with a new generation.
// take drops stale entries instead of firing them, so a staged message
// that was cancelled never fires, and one rescheduled to the same instant
// fires once.
type dueSet struct {
	byTopic map[uint32]*dispatchHeap
	active  []uint32 // topics with entries, in turn order
	cursor  int      // the topic whose turn is next
	n       int      // entries in all topics, stale ones included
	peak    int      // largest n since the heaps were last made
	gen     uint32   // the last generation given
}

func (d *dueSet) len() int { return d.n }

// stage gives the timer t, out of the wheel, a new generation and pushes
// its entry into its topic's heap.
func (d *dueSet) stage(t *wheelTimer) {
	d.gen++
	if d.gen == 0 {
		d.gen = 1 // 0 means taken
	}
	t.Value.seq = d.gen
	d.push(t.Value.topic, dueEntry{due: t.Value.due, pos: t.Value.pos, seq: d.gen})
}

func (d *dueSet) push(topic uint32, r dueEntry) {
	if d.byTopic == nil {
		d.byTopic = map[uint32]*dispatchHeap{}
	}
	h := d.byTopic[topic]
	if h == nil {
		h = &dispatchHeap{}
		d.byTopic[topic] = h
	}
	if h.n == 0 {
		d.active = append(d.active, topic)
	}
	h.push(r)
	d.n++
	d.peak = max(d.peak, d.n)
}

// min returns the earliest due time waiting, if any (stale entries too:
// the fire frontier may only err low).
func (d *dueSet) min() (int64, bool) {
	first, ok := int64(0), false
	for _, t := range d.active {
		if h := d.byTopic[t]; !ok || h.first().due < first {
			first, ok = h.first().due, true
		}
	}
	return first, ok
}

// ready reports whether some entry is due at now.
func (d *dueSet) ready(now int64) bool {
	first, ok := d.min()
	return ok && first <= now
}

// take appends up to n messages due at now to out, in turns: each topic
// with messages due gets an equal share of n, and what a topic cannot use
// goes to the others. It drops the stale entries it meets, and moves the
// messages it takes from near to taken, handing their timers to drop.
func (d *dueSet) take(n int, now int64, near *nearIndex, taken map[uint64]struct{}, drop func(*wheelTimer), out []fireEntry) []fireEntry {
	idle := 0 // topics in a row that had nothing due
	for n > 0 && len(d.active) > 0 && idle < len(d.active) {
		share := max(1, n/len(d.active))
		if d.cursor >= len(d.active) {
			d.cursor = 0
		}
		t := d.active[d.cursor]
		h := d.byTopic[t]
		took := 0
		for took < share && n > 0 && h.n > 0 && h.first().due <= now {
			r := h.pop()
			d.n--
			w := near.get(r.pos)
			if w == nil || w.Scheduled() || w.Value.seq != r.seq || r.seq == 0 {
				continue // stale: cancelled, moved or retried since
			}
			v := &w.Value
			out = append(out, fireEntry{pos: v.pos, due: v.due, topic: v.topic, queue: v.queue, windowed: v.windowed})
			near.del(r.pos)
			taken[r.pos] = struct{}{}
			drop(w)
			n--
			took++
		}
		if took == 0 {
			idle++
		} else {
			idle = 0
		}
		if h.n == 0 {
			d.active = append(d.active[:d.cursor], d.active[d.cursor+1:]...)
		} else {
			d.cursor++
		}
	}
	if d.n == 0 && d.peak > herdShrink {
		d.byTopic, d.peak = nil, 0
	}
	return out
}

// firstBatch is the size of the first fire batch after the dispatcher was
// idle; each later batch may be twice the one before, up to DispatchBatch.
const firstBatch = 256

// readyTopics counts the topics with a message due at now (stale entries
// too), stopping at 2: all batchSizeLocked needs to know.
func (d *dueSet) readyTopics(now int64) int {
	k := 0
	for _, t := range d.active {
		if d.byTopic[t].first().due <= now {
			if k++; k == 2 {
				break
			}
		}
	}
	return k
}

// bucketLoad is a timer bucket on its way into the wheel. The loop starts
// it under the lock with a load plan, a goroutine reads and decodes the
// file without the lock, and the loop then schedules its entries a chunk at
// a time. Until it is done:
//
//   - the wheel is not advanced to the bucket's start, so none of its
//     entries can fire before all of them are in (Inspect and Cancel rely
//     on "not in the wheel and due before loadedUntil" meaning visible);
//   - timers added with a due time at or after loadedUntil and before the
//     bucket's end were not in the plan: they wait in delta and are
//     scheduled last, and the fire frontier stays below them.
type bucketLoad struct {
	bucket  int64
	end     int64
	ready   bool // entries or err are set
	err     error
	entries []timerstore.Entry
	next    int
	delta   []timerRef
}

// timerHandle is a lease or retry timer of a consumer group. The groups
// reach the dispatcher's wheel only through it (startTimerLocked,
// stopTimerLocked), never through the wheel's own types.
type timerHandle struct{ t *wheelTimer }

// running reports whether the handle holds a timer.
func (h timerHandle) running() bool { return h.t != nil }

// ref is what the timer was started with.
func (h timerHandle) ref() timerRef { return h.t.Value }

// batchSizeLocked bounds the next fire batch, upTo being the time up to
// which messages may be taken: DispatchBatch, but at most twice the last
// batch since the dispatcher was idle (starting at firstBatch), and at
// most a quarter of DispatchBatch while more than one topic has messages
// due. Both bound what a message waits for: the first of a herd waits for
// a fire record of firstBatch, and another topic's for the fire in flight
// and its own, each short while topics share the rate.
func (d *dispatcher) batchSizeLocked(upTo int64) int {
	n := min(d.opts.DispatchBatch, max(d.batchRamp, firstBatch))
	d.batchRamp = min(2*n, d.opts.DispatchBatch)
	if d.due.readyTopics(upTo) > 1 {
		n = min(n, max(1, d.opts.DispatchBatch/4))
	}
	return n
}

// stepLoadLocked moves bucket loading forward by one bounded step: start
// the next load, or schedule a chunk of a load that was read, or finish
// one. It returns whether it has more to do right away.
func (d *dispatcher) stepLoadLocked(now int64) bool {
	width := d.timers.Width()
	target := d.timers.BucketOf(now+d.opts.Lookahead.Milliseconds()) + width
	ld := d.load
	if ld == nil {
		if now < d.loadRetryAt {
			return false
		}
		b, ok := d.timers.NextBucket(d.loadedUntil)
		if !ok || b >= target {
			if target > d.loadedUntil {
				d.loadedUntil = target
			}
			if len(d.firedSince) > 0 && d.loadedUntil > d.firedSinceTo {
				d.firedSince = map[uint64]bool{}
			}
			return false
		}
		ld = &bucketLoad{bucket: b, end: b + width}
		d.load = ld
		plan := d.timers.LoadPlan(b)
		go func() {
			entries, err := plan.Read()
			d.mu.Lock()
			ld.entries, ld.err, ld.ready = entries, err, true
			d.mu.Unlock()
			d.life.kickLoop()
		}()
		return false
	}
	if !ld.ready {
		return false
	}
	if ld.err != nil {
		// The delta's timers are in the store: the retried plan has them.
		d.load = nil
		if errors.Is(ld.err, timerstore.ErrCorrupt) {
			// Damage found while running: stop, and let the restart's
			// recovery rebuild the index from the log (checkTimers).
			d.life.failLocked(fmt.Errorf("timer bucket %s: %w", fmtMs(ld.bucket), ld.err))
			return false
		}
		// Do not advance past a bucket we could not read: retry after a pause.
		d.opts.Logger.Error("timer bucket load failed", "bucket", fmtMs(ld.bucket), "err", ld.err)
		d.stats.TimerLoadErrors.Add(1)
		d.loadRetryAt = now + 1000
		return false
	}
	stop := min(len(ld.entries), ld.next+loadChunk)
	for _, en := range ld.entries[ld.next:stop] {
		if (en.Kind == kindMessage || en.Kind == kindWindowed) && d.validLocked(en.Pos, en.Due) {
			d.scheduleLocked(timerRef{pos: en.Pos, due: en.Due, topic: en.Topic, queue: en.Queue, windowed: en.Kind == kindWindowed})
		}
	}
	ld.next = stop
	if ld.next < len(ld.entries) {
		return true
	}
	// Every entry of the plan is in: now the ones added meanwhile, then the
	// bucket counts as loaded.
	d.load = nil
	d.loadedUntil = max(d.loadedUntil, ld.end)
	for _, r := range ld.delta {
		if d.validLocked(r.pos, r.due) {
			d.scheduleLocked(r)
		}
	}
	return true
}

// startTimerLocked starts a lease or retry timer; one already due fires at
// the next turn of the loop.
func (d *dispatcher) startTimerLocked(ref timerRef) timerHandle {
	return timerHandle{d.addWheelLocked(ref)}
}

// stopTimerLocked stops a timer that has not fired and recycles it. It
// returns what the timer was started with.
func (d *dispatcher) stopTimerLocked(h timerHandle) timerRef {
	ref := h.t.Value
	d.leases.Cancel(h.t)
	d.recycleTimerLocked(h.t)
	return ref
}
