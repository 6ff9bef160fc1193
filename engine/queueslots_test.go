package engine

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// queueModel is what groupQueue's slots replaced: four maps by offset and
// the acked offset, with the same operations.
type queueModel struct {
	acked    uint64
	done     map[uint64]bool
	attempts map[uint64]uint32
	leases   map[uint64]*lease
	retrying map[uint64]bool
}

func (m *queueModel) markDone(off uint64) {
	if off < m.acked {
		return
	}
	m.done[off] = true
	delete(m.attempts, off)
	for m.done[m.acked] {
		delete(m.done, m.acked)
		m.acked++
	}
}

// TestQueueSlotsMatchTheMaps drives a group queue and the model with the
// same random leases, retries, attempts and acks over a window that moves
// on (so chunks are made and dropped), with now and then an offset far
// past the rest, and checks after each step that they agree on every
// offset of the window and on the counts.
func TestQueueSlotsMatchTheMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	gq := newGroupQueue()
	m := &queueModel{done: map[uint64]bool{}, attempts: map[uint64]uint32{}, leases: map[uint64]*lease{}, retrying: map[uint64]bool{}}
	var timer wheelTimer
	for step := 0; step < 300000; step++ {
		off := m.acked + uint64(rng.IntN(3000))
		if rng.IntN(1000) == 0 {
			off = m.acked + uint64(rng.IntN(1<<20)) // far past the window
		}
		switch rng.IntN(8) {
		case 0, 1:
			if m.leases[off] == nil && !m.done[off] {
				l := &lease{seq: uint32(step)}
				gq.setLease(off, l)
				m.leases[off] = l
			}
		case 2:
			gq.setLease(off, nil)
			delete(m.leases, off)
		case 3:
			n := uint32(rng.IntN(4))
			if !gq.isDone(off) {
				gq.setAttempts(off, n)
				if n == 0 {
					delete(m.attempts, off)
				} else {
					m.attempts[off] = n
				}
			}
		case 4:
			if !m.retrying[off] && !m.done[off] {
				gq.setRetry(off, timerHandle{&timer})
				m.retrying[off] = true
			}
		case 5:
			gq.setRetry(off, timerHandle{})
			delete(m.retrying, off)
		default:
			// Ack what has no lease or timer, as the engine does.
			if m.leases[off] == nil && !m.retrying[off] {
				gq.markDone(off)
				m.markDone(off)
			}
		}
		if gq.acked != m.acked {
			t.Fatalf("step %d: acked %d, want %d", step, gq.acked, m.acked)
		}
		// The offset the step changed, at once, and a sample of the window
		// (a slot stored in the wrong chunk, or a chunk given back too
		// soon, shows at an offset the step did not name). The sample's
		// stride is wide enough that under the race detector the test
		// takes seconds, not a minute: over 300,000 steps every offset of
		// the window is still looked at thousands of times.
		check := func(o uint64) {
			if gq.isDone(o) != m.done[o] || gq.leaseOf(o) != m.leases[o] || gq.attemptsOf(o) != m.attempts[o] || gq.retryOf(o).running() != m.retrying[o] {
				t.Fatalf("step %d: offset %d: done %v lease %p attempts %d retry %v; want %v %p %d %v", step, o,
					gq.isDone(o), gq.leaseOf(o), gq.attemptsOf(o), gq.retryOf(o).running(), m.done[o], m.leases[o], m.attempts[o], m.retrying[o])
			}
		}
		if off >= m.acked { // below it everything is done, and the model forgets it
			check(off)
		}
		for o := m.acked + uint64(rng.IntN(64)); o < m.acked+3000; o += 1 + uint64(rng.IntN(400)) {
			check(o)
		}
		if gq.nDone != len(m.done) || gq.nLeases != len(m.leases) || gq.nRetrying != len(m.retrying) || gq.nAttempts != len(m.attempts) {
			t.Fatalf("step %d: counts done %d leases %d retrying %d attempts %d; want %d %d %d %d", step,
				gq.nDone, gq.nLeases, gq.nRetrying, gq.nAttempts, len(m.done), len(m.leases), len(m.retrying), len(m.attempts))
		}
		if len(m.done)+len(m.leases)+len(m.retrying)+len(m.attempts) == 0 && gq.slots.chunks != nil {
			t.Fatalf("step %d: the queue holds no state but keeps %d chunks", step, len(gq.slots.chunks))
		}
	}
	// The checkpoint's walk gives exactly the model's done and attempts.
	done, attempts := 0, 0
	gq.eachState(func(off uint64, n uint32, d bool) {
		if d != m.done[off] || n != m.attempts[off] {
			t.Fatalf("eachState: offset %d done %v attempts %d; want %v %d", off, d, n, m.done[off], m.attempts[off])
		}
		if d {
			done++
		}
		if n != 0 {
			attempts++
		}
	})
	if done != len(m.done) || attempts != len(m.attempts) {
		t.Fatalf("eachState gave %d done and %d attempts; want %d and %d", done, attempts, len(m.done), len(m.attempts))
	}
}

// TestQueueSlotsGiveChunksBack: the chunks behind the acked offset go, so
// a group that keeps up holds one or two chunks however many it acked, and
// none once it has acked everything it received.
func TestQueueSlotsGiveChunksBack(t *testing.T) {
	gq := newGroupQueue()
	for off := uint64(0); off < 100*slotChunk; off++ {
		gq.setAttempts(off, 1)
		gq.markDone(off)
		if n := len(gq.slots.chunks); n > 2 {
			t.Fatalf("after acking offset %d the queue holds %d chunks", off, n)
		}
	}
	if gq.acked != 100*slotChunk || gq.nDone != 0 || gq.slots.chunks != nil {
		t.Fatalf("acked %d with %d done above it and %d chunks; want %d, 0 and none", gq.acked, gq.nDone, len(gq.slots.chunks), 100*slotChunk)
	}
}

// TestQueueSlotsKeepALeaseOfADoneOffset: an offset can be done while a
// later handout's lease of it is live (deliver found its record gone under
// an older handout); the lease stays findable, and counted, however far
// acked moves on, until it is ended, as it was when the slots were maps.
func TestQueueSlotsKeepALeaseOfADoneOffset(t *testing.T) {
	gq := newGroupQueue()
	const x = 5
	gq.setAttempts(x, 2)
	l := &lease{seq: 2, attempt: 2}
	gq.setLease(x, l)
	gq.markDone(x)
	for off := uint64(0); off < 4*slotChunk; off++ {
		gq.markDone(off)
	}
	if gq.acked != 4*slotChunk || gq.leaseOf(x) != l || gq.nLeases != 1 {
		t.Fatalf("acked %d: lease of the done offset %p, %d leases; want %d, %p, 1", gq.acked, gq.leaseOf(x), gq.nLeases, 4*slotChunk, l)
	}
	gq.setLease(x, nil)
	gq.markDone(gq.acked)
	if gq.nLeases != 0 || gq.slots.chunks != nil {
		t.Fatalf("after the lease ended and the next ack: %d leases, %d chunks; want 0 and none", gq.nLeases, len(gq.slots.chunks))
	}
}

// TestQueueSlotsSmallPerActiveQueue: a group queue with one message in
// flight holds a chunk of slotChunk slots, about 1.5 KiB, not tens.
func TestQueueSlotsSmallPerActiveQueue(t *testing.T) {
	const nq = 2000
	qs := make([]*groupQueue, nq)
	b0 := heapAfterGC()
	for i := range qs {
		gq := newGroupQueue()
		off := uint64(i * 7)
		gq.acked, gq.next = off, off+1
		gq.setAttempts(off, 1)
		gq.setLease(off, &lease{seq: 1, attempt: 1})
		qs[i] = gq
	}
	if per := float64(heapAfterGC()-b0) / nq; per > 2048 {
		t.Fatalf("a group queue with one message in flight holds %.0f B", per)
	}
	runtime.KeepAlive(qs)
}

// TestEmptyTakeAllocatesNothing: a take that can hand out nothing (a FIFO
// queue with its message in flight, a long poll woken for nothing) makes
// no slice for the handouts it might have had.
func TestEmptyTakeAllocatesNothing(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.e.CreateTopic("f", TopicConfig{Queues: 1, FIFO: true}); err != nil {
		t.Fatal(err)
	}
	reqs := make([]SendRequest, 300)
	for i := range reqs {
		reqs[i] = SendRequest{Message: message.Message{Topic: "f", Group: "order-1", Body: []byte("x")}}
	}
	if _, err := h.e.SendBatch(t.Context(), reqs); err != nil {
		t.Fatal(err)
	}
	h.waitVisible("f", 300)
	h.receiveN("f", "g", 1, time.Hour) // the queue's message in flight
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	g := h.e.cons.group("f", "g")
	allocs := testing.AllocsPerRun(20, func() {
		if hs := h.e.cons.takeLocked(g, 1000, time.Minute); len(hs) != 0 {
			t.Fatalf("a FIFO queue with a message in flight handed out %d", len(hs))
		}
	})
	if allocs != 0 {
		t.Fatalf("a take that hands out nothing made %v allocations", allocs)
	}
}

// TestKeepingUpRecyclesChunks: a consumer that acks all it received
// before its next receive empties the queue each time, and the queue then
// lets its chunk go; the next receive's chunk comes from slotChunks, not
// from a new allocation (it was one 1.5 KiB chunk for every few messages
// of a steady stream), and it comes zeroed. Garbage collections during
// the loop may empty the pool (two in a row do); that costs a chunk.
func TestKeepingUpRecyclesChunks(t *testing.T) {
	gq := newGroupQueue()
	off := uint64(0)
	var leases [5]lease // the engine's own, not what is measured
	receiveAndAck := func() {
		for i := 0; i < 5; i++ {
			gq.setAttempts(off+uint64(i), 1)
			gq.setLease(off+uint64(i), &leases[i])
		}
		for i := 0; i < 5; i++ {
			gq.setLease(off+uint64(i), nil) // the acks end the leases
		}
		for i := 0; i < 5; i++ {
			gq.markDone(off + uint64(i))
		}
		off += 5
		if gq.slots.chunks != nil {
			t.Fatalf("acked everything up to %d and still holds %d chunks", off, len(gq.slots.chunks))
		}
	}
	// Bytes, not allocations: the queue's slice of chunk pointers (one
	// word) is still made again after each release. Under -race the pool
	// drops some chunks on purpose; the receives still run, and the
	// zeroing below is still checked.
	receiveAndAck() // the pool's first chunk
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 200
	for range n {
		receiveAndAck()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per >= 256 && !raceEnabled {
		t.Fatalf("a receive and its acks allocated %d B; want the chunk (%d B) recycled", per, slotChunk*24)
	}
	// A recycled chunk is zero: nothing of the offsets it held before
	// shows at the offsets it holds now.
	for i := 0; i < 20; i++ {
		gq.setAttempts(off, 3)
		gq.setLease(off, nil)
		for o := off - off%slotChunk; o < off-off%slotChunk+slotChunk; o++ {
			if o != off && (gq.attemptsOf(o) != 0 || gq.isDone(o) && o >= gq.acked) {
				t.Fatalf("offset %d of a recycled chunk shows attempts %d, done %v", o, gq.attemptsOf(o), gq.isDone(o))
			}
		}
		gq.markDone(off)
		off += 7
		gq.acked, gq.next = off, off
	}
}
