package main

import (
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/benchreport"
)

// entry is what the bench records about one message; times are Unix
// nanoseconds, 0 meaning "not yet".
type entry struct {
	due     int64 // the herd's instant, a whole millisecond
	sent    int64 // when the publish was answered or failed
	arrival int64 // when a consumer first got the message
	// stored is when the server stored the fired copy on the target
	// subject (its stream timestamp), of the first delivery: the moment it
	// became visible to consumers, as hourglass's "visible".
	stored int64
	// receipts counts how many times a consumer got the message.
	receipts uint32
	state    benchreport.SendState
}

// recorder holds one entry per message, indexed by sequence number. It is
// safe for concurrent use by the producers and consumers.
type recorder struct {
	mu      sync.Mutex
	entries []entry
	// acked and ackedArrived make the completion check O(1): the run is
	// complete when every acknowledged message has arrived.
	acked, ackedArrived int
	// redelivered counts deliveries JetStream marked as delivered before
	// (NumDelivered > 1); foreign counts messages of no entry.
	redelivered, foreign int
}

// newRecorder returns a recorder of n messages, all due at dueNs.
func newRecorder(n int, dueNs int64) *recorder {
	r := &recorder{entries: make([]entry, n)}
	for i := range r.entries {
		r.entries[i].due = dueNs
	}
	return r
}

// sent records the outcome of the publish of message seq.
func (r *recorder) sent(seq int, ok bool, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &r.entries[seq]
	e.sent = at
	if !ok {
		e.state = benchreport.SendFailed
		return
	}
	e.state = benchreport.SendAcked
	r.acked++
	if e.arrival != 0 {
		// Delivered before the PubAck came back (possible when a publish
		// is answered after the instant).
		r.ackedArrived++
	}
}

// arrive records that a consumer got message seq at time at, on its
// numDelivered-th delivery of the copy the server stored at stored. A seq
// of no entry is counted as foreign.
func (r *recorder) arrive(seq int, at, stored int64, numDelivered uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if numDelivered > 1 {
		r.redelivered++
	}
	if seq < 0 || seq >= len(r.entries) {
		r.foreign++
		return
	}
	e := &r.entries[seq]
	e.receipts++
	if e.receipts > 1 {
		return
	}
	e.arrival, e.stored = at, stored
	if e.state == benchreport.SendAcked {
		r.ackedArrived++
	}
}

// complete reports whether every acknowledged message has arrived.
func (r *recorder) complete() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ackedArrived == r.acked
}

// frozen returns the entries; every producer and consumer must have
// stopped, as the slice is not copied.
func (r *recorder) frozen() []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entries
}

// Row, Lateness and HerdReport are hourglass bench's result definitions
// (package benchreport), shared so that both benches measure one way.
type (
	Row        = benchreport.Row
	Lateness   = benchreport.Lateness
	HerdReport = benchreport.HerdReport
)

// measure computes the total row and the herd's result from the entries
// of a finished run whose instant is atNs (Unix ns).
func measure(entries []entry, atNs int64) (Row, HerdReport) {
	t := benchreport.Tally{HerdAt: atNs}
	for i := range entries {
		e := &entries[i]
		t.Add(benchreport.Message{State: e.state, Sent: e.sent, Due: e.due,
			Arrival: e.arrival, Visible: e.stored, Receipts: e.receipts})
	}
	row := t.Row("herd")
	return row, t.Herd(row, time.Unix(0, atNs).UTC())
}
