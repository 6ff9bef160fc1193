package main

import (
	"math"
	"slices"
	"sync"
	"time"
)

// sendState is what the bench knows about the publish of one message.
type sendState uint8

const (
	// sendPending: the publish has not been answered yet.
	sendPending sendState = iota
	// sendAcked: JetStream answered with a PubAck, so it stored the
	// schedule and promised the delivery.
	sendAcked
	// sendFailed: the publish failed or timed out; the server may or may
	// not have stored it, so it is neither lost if it never arrives nor a
	// duplicate if it does.
	sendFailed
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
	state    sendState
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
		e.state = sendFailed
		return
	}
	e.state = sendAcked
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
	if e.state == sendAcked {
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

// Lateness summarises arrival minus due time, in milliseconds rounded to
// the microsecond. The quantiles are nearest-rank: each is a value that
// was observed. The JSON names are those of `hourglass bench`.
type Lateness struct {
	Count int     `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

// Row is the result over all messages, with the meaning and JSON names of
// a row of `hourglass bench`: Sent counts acknowledged messages, Lost
// those of them that never arrived, Early first arrivals before the due
// time (zero tolerance), Duplicated messages that arrived more than once.
type Row struct {
	Name            string   `json:"name"`
	Sent            int      `json:"sent"`
	Received        int      `json:"received"`
	Lost            int      `json:"lost"`
	Early           int      `json:"early"`
	EarlyMaxMs      float64  `json:"early_max_ms"`
	Duplicated      int      `json:"duplicated"`
	ExtraDeliveries int      `json:"extra_deliveries"`
	Lateness        Lateness `json:"lateness"`
	// BrokerLateness is stored minus due: when the server made each
	// message visible, as hourglass bench's broker-side visible - due.
	BrokerLateness Lateness `json:"broker_lateness"`
	SendRate       float64  `json:"send_rate_per_s"`
	ReceiveRate    float64  `json:"receive_rate_per_s"`
}

// HerdReport is the herd's result, as `hourglass bench` reports it: the
// first and last arrival measured from the instant, and how many
// publishes were answered only after it.
type HerdReport struct {
	At           time.Time `json:"at"`
	Messages     int       `json:"messages"`
	SentAfterAt  int       `json:"sent_after_at"`
	FirstAfterMs float64   `json:"first_after_ms"`
	LastAfterMs  float64   `json:"last_after_ms"`
	AllArrived   bool      `json:"all_arrived"`
	DrainRate    float64   `json:"drain_rate_per_s"`
}

// measure computes the total row and the herd's result from the entries
// of a finished run whose instant is atNs (Unix ns).
func measure(entries []entry, atNs int64) (Row, HerdReport) {
	row := Row{Name: "herd"}
	var late, broker []int64
	var firstSent, lastSent, firstArr, lastArr int64
	h := HerdReport{At: time.Unix(0, atNs).UTC()}
	for i := range entries {
		e := &entries[i]
		if e.state == sendAcked {
			row.Sent++
			firstSent, lastSent = earliest(firstSent, e.sent), max(lastSent, e.sent)
			if e.arrival == 0 {
				row.Lost++
			} else {
				row.Received++
			}
			if e.sent > atNs {
				h.SentAfterAt++
			}
		}
		if e.arrival == 0 {
			continue
		}
		firstArr, lastArr = earliest(firstArr, e.arrival), max(lastArr, e.arrival)
		d := e.arrival - e.due
		late = append(late, d)
		if e.stored != 0 {
			broker = append(broker, e.stored-e.due)
		}
		if d < 0 {
			row.Early++
			row.EarlyMaxMs = max(row.EarlyMaxMs, nsToMs(-d))
		}
		if e.receipts > 1 {
			row.Duplicated++
			row.ExtraDeliveries += int(e.receipts - 1)
		}
	}
	row.Lateness = summarize(late)
	row.BrokerLateness = summarize(broker)
	row.SendRate = perSecond(row.Sent, firstSent, lastSent)
	row.ReceiveRate = perSecond(len(late), firstArr, lastArr)
	h.Messages = row.Sent
	h.AllArrived = row.Lost == 0 && row.Sent > 0
	h.DrainRate = row.ReceiveRate
	if lastArr != 0 {
		h.FirstAfterMs = nsToMs(firstArr - atNs)
		h.LastAfterMs = nsToMs(lastArr - atNs)
	}
	return row, h
}

// earliest is the smaller of a and b, where 0 means "none yet".
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// summarize sorts ns (nanoseconds) in place and summarises it; an empty
// slice gives a zero Lateness.
func summarize(ns []int64) Lateness {
	if len(ns) == 0 {
		return Lateness{}
	}
	slices.Sort(ns)
	var sum float64
	for _, v := range ns {
		sum += float64(v)
	}
	q := func(p float64) float64 {
		// Nearest rank: the smallest value with at least p% at or below
		// it; the epsilon keeps 99.9% of 1000 at rank 999.
		rank := int(math.Ceil(p*float64(len(ns))/100 - 1e-9))
		return nsToMs(ns[min(max(rank, 1), len(ns))-1])
	}
	return Lateness{
		Count: len(ns), Min: nsToMs(ns[0]), Mean: math.Round(sum/float64(len(ns))/1e3) / 1e3,
		P50: q(50), P95: q(95), P99: q(99), P999: q(99.9), Max: nsToMs(ns[len(ns)-1]),
	}
}

// nsToMs converts nanoseconds to milliseconds rounded to the microsecond.
func nsToMs(ns int64) float64 { return math.Round(float64(ns)/1e3) / 1e3 }

// perSecond is count per second over [from, to] (Unix ns), 0 for fewer
// than two events or an empty span.
func perSecond(count int, from, to int64) float64 {
	if count < 2 || to <= from {
		return 0
	}
	return math.Round(float64(count)/time.Duration(to-from).Seconds()*10) / 10
}
