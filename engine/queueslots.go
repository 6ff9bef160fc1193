package engine

import "sync"

// groupQueue is a group's progress in one queue: the offsets it is done
// with, and the state of each offset past that it has handed out.
//
// Invariant: every offset below acked is done; next >= acked is the first
// offset never handed out since start; an offset's state is in its slot
// (queueSlots); nDone counts the done slots at or above acked, and
// nLeases, nRetrying and nAttempts the slots held (below acked too) with a
// lease, a backoff timer and attempts; when all four are 0 the queue holds
// no chunk.
type groupQueue struct {
	acked uint64
	next  uint64
	slots queueSlots
	ready []uint64 // offsets whose backoff ended, in order

	nDone, nLeases, nRetrying, nAttempts int
}

type lease struct {
	seq     uint32
	attempt uint32
	timer   timerHandle
	// pos is the message's identity position, for its trail entries;
	// hasPos is false until the delivery has read it (deliver).
	pos    uint64
	hasPos bool
}

func newGroupQueue() *groupQueue { return &groupQueue{} }

// queueSlot is what a group knows of one offset of a queue past its acked
// offset. A zero slot knows nothing.
type queueSlot struct {
	lease    *lease      // the live lease, if handed out
	retry    timerHandle // the backoff timer, if it failed and waits to come back
	attempts uint32      // deliveries so far, once handed out
	done     bool        // acked or dead-lettered (a slot that acked passed may keep it)
}

// slotChunk is the number of offsets in one chunk of queueSlots (1.5 KiB):
// enough for a consumer's walk to stay in a few cache lines' neighbours,
// and small, since a group queue with one message in flight holds a chunk
// (10,000 groups of 4 queues then hold 60 MiB; chunks of 1,024 held 1 GiB).
const slotChunk = 64

// queueSlots holds a group queue's slots in chunks of consecutive offsets,
// from base on. A consumer's receives and acks walk offsets in order, so
// their slots are neighbours in memory: four maps by offset (done,
// attempts, leases, retrying) cost a dozen hash lookups a message, about
// a tenth of the broker's CPU while a million-message herd drained over
// HTTP (docs/benchmarks.md, issue 8, eleventh pass). A chunk is made when
// an offset in it first gets state, and dropped when the acked offset
// passes its end (unless a slot in it still holds a lease or a backoff
// timer, see dropBelowAcked), so memory follows the span between the oldest offset
// not done and the newest handed out, which MaxUnackedSpan bounds (a
// recovery may bring offsets of a wider span that an earlier run allowed;
// their chunks go as the group acks past them).
//
// Invariant: base is a multiple of slotChunk; chunks[i], if not nil, holds
// the offsets from base+i*slotChunk; a nil chunk's slots are all zero.
type queueSlots struct {
	base   uint64
	chunks []*[slotChunk]queueSlot
}

// slotChunks recycles chunks across every group queue of the process. A
// consumer that keeps up empties its queue after each ack, and release
// then drops the queue's chunk, so that the next receive made a new one:
// one 1.5 KiB chunk for every few messages, 12 % of what the engine
// allocated in a group-lateness window (docs/benchmarks.md, group-lateness),
// and the garbage collections it brought were that run's lateness tail.
// A chunk goes into the pool zeroed (freeChunk), so that make's chunk has
// only zero slots whether it is new or recycled; the pool's contents go
// with the garbage collector's cycles, so idle queues still hold nothing.
var slotChunks = sync.Pool{New: func() any { return new([slotChunk]queueSlot) }}

// freeChunk zeroes c and gives it to slotChunks. Only the group queue that
// held c may call it, once c is out of its chunks: nothing else points
// into a chunk (the slots are reached through groupQueue's methods only).
func freeChunk(c *[slotChunk]queueSlot) {
	*c = [slotChunk]queueSlot{}
	slotChunks.Put(c)
}

// at returns the slot of off, or nil if off has no chunk (a zero slot).
func (s *queueSlots) at(off uint64) *queueSlot {
	if off < s.base {
		return nil
	}
	i := (off - s.base) / slotChunk
	if i >= uint64(len(s.chunks)) || s.chunks[i] == nil {
		return nil
	}
	return &s.chunks[i][(off-s.base)%slotChunk]
}

// make returns the slot of off, making its chunk (and moving base down to
// off's chunk if off is below it).
func (s *queueSlots) make(off uint64) *queueSlot {
	switch nb := off - off%slotChunk; {
	case len(s.chunks) == 0:
		s.base = nb
	case nb < s.base:
		k := (s.base - nb) / slotChunk
		s.chunks = append(make([]*[slotChunk]queueSlot, k, int(k)+len(s.chunks)), s.chunks...)
		s.base = nb
	}
	i := (off - s.base) / slotChunk
	for uint64(len(s.chunks)) <= i {
		s.chunks = append(s.chunks, nil)
	}
	if s.chunks[i] == nil {
		s.chunks[i] = slotChunks.Get().(*[slotChunk]queueSlot)
	}
	return &s.chunks[i][(off-s.base)%slotChunk]
}

// slot returns the slot of off, made if need be.
func (gq *groupQueue) slot(off uint64) *queueSlot { return gq.slots.make(off) }

// dropBelowAcked drops the chunks that end at or before acked, up to the
// first that still holds a lease or a backoff timer: an offset can be
// done while a later handout's lease of it is live (deliver finds its
// record gone under an older handout), and that lease must stay findable
// until its own deliver ends it and stops its timer, as it was when the
// slots were maps.
func (gq *groupQueue) dropBelowAcked() {
	s := &gq.slots
	for len(s.chunks) > 0 && s.base+slotChunk <= gq.acked {
		if c := s.chunks[0]; c != nil {
			attempts := 0
			for j := range c {
				if c[j].lease != nil || c[j].retry.running() {
					return
				}
				if c[j].attempts != 0 {
					attempts++
				}
			}
			gq.nAttempts -= attempts
			freeChunk(c)
		}
		s.chunks[0] = nil
		s.chunks = s.chunks[1:]
		s.base += slotChunk
	}
	if len(s.chunks) == 0 {
		s.chunks = nil // let the array go; the next make sets base
	}
}

// leaseOf returns the live lease of off, or nil.
func (gq *groupQueue) leaseOf(off uint64) *lease {
	if sl := gq.slots.at(off); sl != nil {
		return sl.lease
	}
	return nil
}

// setLease gives off the lease l, or ends its lease
// when l is nil.
func (gq *groupQueue) setLease(off uint64, l *lease) {
	if l == nil {
		if sl := gq.slots.at(off); sl != nil && sl.lease != nil {
			sl.lease = nil
			gq.nLeases--
			gq.release()
		}
		return
	}
	sl := gq.slot(off)
	if sl.lease == nil {
		gq.nLeases++
	}
	sl.lease = l
}

// attemptsOf returns how many times off was handed out (0 when done or
// never).
func (gq *groupQueue) attemptsOf(off uint64) uint32 {
	if sl := gq.slots.at(off); sl != nil && off >= gq.acked {
		return sl.attempts
	}
	return 0
}

// setAttempts records n deliveries of off; 0 forgets.
func (gq *groupQueue) setAttempts(off uint64, n uint32) {
	if n == 0 {
		if sl := gq.slots.at(off); sl != nil && sl.attempts != 0 {
			sl.attempts = 0
			gq.nAttempts--
			gq.release()
		}
		return
	}
	sl := gq.slot(off)
	if sl.attempts == 0 {
		gq.nAttempts++
	}
	sl.attempts = n
}

// release drops every chunk once no slot holds state, so that a group
// queue that is idle (most of them, most of the time) holds no memory for
// slots.
func (gq *groupQueue) release() {
	if gq.nDone == 0 && gq.nLeases == 0 && gq.nRetrying == 0 && gq.nAttempts == 0 {
		for _, c := range gq.slots.chunks {
			if c != nil {
				freeChunk(c)
			}
		}
		gq.slots.chunks = nil
	}
}

// retryOf returns the backoff timer of off, if it has one.
func (gq *groupQueue) retryOf(off uint64) timerHandle {
	if sl := gq.slots.at(off); sl != nil {
		return sl.retry
	}
	return timerHandle{}
}

// setRetry gives off the backoff timer h, or forgets
// its timer when h does not run.
func (gq *groupQueue) setRetry(off uint64, h timerHandle) {
	if !h.running() {
		if sl := gq.slots.at(off); sl != nil && sl.retry.running() {
			sl.retry = timerHandle{}
			gq.nRetrying--
			gq.release()
		}
		return
	}
	sl := gq.slot(off)
	if !sl.retry.running() {
		gq.nRetrying++
	}
	sl.retry = h
}

// isDone reports whether the group is done with off.
func (gq *groupQueue) isDone(off uint64) bool {
	if off < gq.acked {
		return true
	}
	sl := gq.slots.at(off)
	return sl != nil && sl.done
}

// markDone records that the group is done with off and moves acked past
// every done offset in a row; a done offset forgets its attempts.
func (gq *groupQueue) markDone(off uint64) {
	if off < gq.acked {
		return
	}
	sl := gq.slot(off)
	if sl.attempts != 0 {
		sl.attempts = 0
		gq.nAttempts--
	}
	if !sl.done {
		sl.done = true
		gq.nDone++
	}
	for {
		sl := gq.slots.at(gq.acked)
		if sl == nil || !sl.done {
			break
		}
		// Leaving the slot as it is: acked passes it, and its chunk
		// goes once acked passes the chunk's end.
		gq.nDone--
		gq.acked++
	}
	gq.dropBelowAcked()
	gq.release()
	if gq.next < gq.acked {
		gq.next = gq.acked
	}
}

// eachState calls fn for each offset at or above acked with attempts or
// done, in offset order (a checkpoint's copy of the queue).
func (gq *groupQueue) eachState(fn func(off uint64, attempts uint32, done bool)) {
	s := &gq.slots
	for i, c := range s.chunks {
		if c == nil {
			continue
		}
		for j := range c {
			sl := &c[j]
			off := s.base + uint64(i)*slotChunk + uint64(j)
			if off >= gq.acked && (sl.attempts != 0 || sl.done) {
				fn(off, sl.attempts, sl.done)
			}
		}
	}
}

// resetTo forgets the queue's progress and starts it at off, as a seek
// does: every lease and backoff timer is handed to stop first, so that
// none fires for the state that is gone.
func (gq *groupQueue) resetTo(off uint64, stop func(timerHandle)) {
	for _, c := range gq.slots.chunks {
		if c == nil {
			continue
		}
		for j := range c {
			if l := c[j].lease; l != nil {
				stop(l.timer)
			}
			if c[j].retry.running() {
				stop(c[j].retry)
			}
		}
	}
	*gq = groupQueue{acked: off, next: off}
}
