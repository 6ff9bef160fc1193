package loadtest

import (
	"sync"

	"github.com/hourglass-mq/hourglass/benchreport"
)

// entry is everything the bench records about one message. Times are
// Unix nanoseconds except where the field says otherwise.
type entry struct {
	// due is the intended due time; always a whole millisecond, the
	// API's resolution.
	due int64
	// sent is when the send request was answered (or failed).
	sent int64
	// arrival is when a receive first returned the message; 0 = never.
	arrival int64
	// brokerDue and brokerVisible are the broker's own due and
	// visibility times (Unix ms) reported with the first receipt.
	brokerDue, brokerVisible int64
	// receipts counts how many times a receive returned the message.
	receipts uint32
	tier     uint8
	state    benchreport.SendState
}

// recorder holds the entries of a run, indexed by sequence number, and
// the running counters the progress line shows. It is safe for
// concurrent use; every method takes mu for a short, bounded time.
type recorder struct {
	mu      sync.Mutex
	entries []entry
	// The counters below are kept equal to what a scan of entries would
	// give; they exist so that progress and completion checks are O(1).
	acked, failed int
	// ackedArrived counts entries that are benchreport.SendAcked and have arrived;
	// the run is complete when it equals acked.
	ackedArrived int
	// arrived counts entries that have arrived, whatever their send state.
	arrived int
	// extra counts receipts beyond the first of a message.
	extra int
	// early counts first arrivals before the due time.
	early int
	// foreign counts received messages that are not from this run.
	foreign int
	// redelivered counts receipts the broker marked as attempt > 1.
	redelivered int
	// maxAckedDue is the latest due time of an acknowledged message.
	maxAckedDue int64
}

// newRecorder returns a recorder with room for n entries.
func newRecorder(n int) *recorder {
	return &recorder{entries: make([]entry, 0, n)}
}

// add records a batch of messages about to be sent and returns the
// sequence number of the first; the others follow in order.
func (r *recorder) add(dues []int64, tiers []uint8) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := len(r.entries)
	for i, d := range dues {
		r.entries = append(r.entries, entry{due: d, tier: tiers[i]})
	}
	return first
}

// redue sets new due times for the pending entries from first on, before
// they are sent again after a refused send.
func (r *recorder) redue(first int, dues []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, d := range dues {
		r.entries[first+i].due = d
	}
}

// dues returns the due times of entries [first, first+n).
func (r *recorder) dues(first, n int) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int64, n)
	for i := range out {
		out[i] = r.entries[first+i].due
	}
	return out
}

// sent records the outcome of the send of entries [first, first+n).
func (r *recorder) sent(first, n int, ok bool, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := first; i < first+n; i++ {
		e := &r.entries[i]
		e.sent = at
		if !ok {
			e.state = benchreport.SendFailed
			r.failed++
			continue
		}
		e.state = benchreport.SendAcked
		r.acked++
		r.maxAckedDue = max(r.maxAckedDue, e.due)
		if e.arrival != 0 {
			// The message was received before its send was answered
			// (a due-now message and a fast consumer).
			r.ackedArrived++
		}
	}
}

// arrival is one message as returned by a receive.
type arrival struct {
	seq int
	// at is when the receive returned (Unix ns).
	at int64
	// brokerDue and brokerVisible are the broker's fields (Unix ms).
	brokerDue, brokerVisible int64
	attempt                  int
}

// arrive records a batch of arrivals. A seq outside the recorded range is
// counted as foreign (a message of another run on the same topic).
func (r *recorder) arrive(batch []arrival) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range batch {
		if a.attempt > 1 {
			r.redelivered++
		}
		if a.seq < 0 || a.seq >= len(r.entries) {
			r.foreign++
			continue
		}
		e := &r.entries[a.seq]
		e.receipts++
		if e.receipts > 1 {
			r.extra++
			continue
		}
		e.arrival = a.at
		e.brokerDue, e.brokerVisible = a.brokerDue, a.brokerVisible
		r.arrived++
		if a.at < e.due {
			r.early++
		}
		if e.state == benchreport.SendAcked {
			r.ackedArrived++
		}
	}
}

// counters is a snapshot of the recorder's counters.
type counters struct {
	acked, failed, ackedArrived, arrived, extra, early, foreign, redelivered int
	maxAckedDue                                                              int64
	// overdue counts acknowledged messages past their due time that have
	// not arrived (computed only by snapshotOverdue).
	overdue int
}

// snapshot returns the counters.
func (r *recorder) snapshot() counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countersLocked()
}

func (r *recorder) countersLocked() counters {
	return counters{acked: r.acked, failed: r.failed, ackedArrived: r.ackedArrived, arrived: r.arrived,
		extra: r.extra, early: r.early, foreign: r.foreign, redelivered: r.redelivered, maxAckedDue: r.maxAckedDue}
}

// snapshotOverdue is snapshot plus the overdue count as of now (Unix ns);
// it scans every entry, so it is for the once-a-second progress line.
func (r *recorder) snapshotOverdue(now int64) counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.countersLocked()
	for i := range r.entries {
		e := &r.entries[i]
		if e.state == benchreport.SendAcked && e.arrival == 0 && e.due <= now {
			c.overdue++
		}
	}
	return c
}

// complete reports whether every acknowledged message has arrived.
func (r *recorder) complete() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ackedArrived == r.acked
}

// frozen returns the entries for reporting. The caller must have stopped
// every producer and consumer: the slice is not copied.
func (r *recorder) frozen() []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entries
}
