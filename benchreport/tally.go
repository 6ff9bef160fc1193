package benchreport

import (
	"fmt"
	"time"
)

// Row is the result for one tier (or a class of messages).
type Row struct {
	Name string `json:"name"`
	// Sent is the number of acknowledged messages.
	Sent int `json:"sent"`
	// Received is how many of them arrived; Lost how many did not.
	Received int `json:"received"`
	Lost     int `json:"lost"`
	// Early counts first arrivals before the due time; EarlyMaxMs is the
	// largest such gap.
	Early      int     `json:"early"`
	EarlyMaxMs float64 `json:"early_max_ms"`
	// Duplicated counts messages received more than once;
	// ExtraDeliveries counts the receipts beyond the first.
	Duplicated      int `json:"duplicated"`
	ExtraDeliveries int `json:"extra_deliveries"`
	// Lateness is arrival at the consumer minus the intended due time, of
	// every message that arrived (acknowledged or not).
	Lateness Lateness `json:"lateness"`
	// BrokerLateness is the broker's own visible-minus-due (ms
	// resolution), of the same messages.
	BrokerLateness Lateness `json:"broker_lateness"`
	// SendRate and ReceiveRate are messages per second between the
	// first and last send answer, and the first and last arrival.
	// ReceiveSpanS is that arrival window, in seconds. Tiers are sent
	// interleaved, so a tier's SendRate is the run's in proportion to its
	// share and the table leaves it out (the run's is in Sends); each
	// row's ReceiveRate is over its own window, which the table shows
	// beside it, since the windows of tiers overlap and the all row's
	// spans them all.
	SendRate     float64 `json:"send_rate_per_s"`
	ReceiveRate  float64 `json:"receive_rate_per_s"`
	ReceiveSpanS float64 `json:"receive_span_s"`
}

// HerdReport is the herd's result.
type HerdReport struct {
	At       time.Time `json:"at"`
	Messages int       `json:"messages"`
	// SentAfterAt counts messages acknowledged only after the instant;
	// their lateness includes the time it took to send them.
	SentAfterAt int `json:"sent_after_at"`
	// FirstAfterMs and LastAfterMs are the first and last arrival,
	// measured from the instant; LastAfterMs is how long until all
	// arrived (or until the last that arrived, if some were lost).
	FirstAfterMs float64 `json:"first_after_ms"`
	LastAfterMs  float64 `json:"last_after_ms"`
	AllArrived   bool    `json:"all_arrived"`
	// DrainRate is arrivals per second between first and last arrival.
	DrainRate float64 `json:"drain_rate_per_s"`
}

// SendState is what a bench knows about the send of one message; it
// decides what the message counts as.
type SendState uint8

const (
	// SendPending: the send is under way.
	SendPending SendState = iota
	// SendAcked: the broker acknowledged the send, so it promised the
	// delivery: a message that never arrives is lost.
	SendAcked
	// SendFailed: the send failed; the broker may or may not have stored
	// the message, so it is neither lost if it never arrives nor a
	// duplicate if it does.
	SendFailed
)

// Message is what a bench knows of one message at the end of a run, for
// a Tally. Times are Unix nanoseconds; 0 means "never" or "unknown".
type Message struct {
	// State is the send's outcome; only SendAcked messages count as sent.
	State SendState
	// Sent is when the send was answered; Due is the intended due time.
	Sent, Due int64
	// Arrival is when a consumer first got the message.
	Arrival int64
	// Visible is when the broker made it visible (its own clock), or 0.
	Visible int64
	// Receipts counts the times a consumer got it.
	Receipts uint32
}

// Tally accumulates Messages into a Row and, for a herd, a HerdReport:
// the one place where lost, early, duplicated, lateness and the rates are
// defined, for hourglass bench and the benches against other systems.
// The zero value is ready; set HerdAt before adding for Herd.
type Tally struct {
	// HerdAt is a herd's instant (Unix ns): Herd counts the sends
	// answered after it and measures arrivals from it.
	HerdAt int64

	row                 Row
	late, visible       []int64
	firstSent, lastSent int64
	firstArr, lastArr   int64
	sentAfterAt         int
}

// Add counts m.
func (t *Tally) Add(m Message) {
	if m.State == SendAcked {
		t.row.Sent++
		t.firstSent, t.lastSent = earliest(t.firstSent, m.Sent), max(t.lastSent, m.Sent)
		if m.Arrival == 0 {
			t.row.Lost++
		} else {
			t.row.Received++
		}
		if t.HerdAt != 0 && m.Sent > t.HerdAt {
			t.sentAfterAt++
		}
	}
	if m.Arrival == 0 {
		return
	}
	t.firstArr, t.lastArr = earliest(t.firstArr, m.Arrival), max(t.lastArr, m.Arrival)
	d := m.Arrival - m.Due
	t.late = append(t.late, d)
	if m.Visible != 0 {
		t.visible = append(t.visible, m.Visible-m.Due)
	}
	if d < 0 {
		t.row.Early++
		t.row.EarlyMaxMs = max(t.row.EarlyMaxMs, NsToMs(-d))
	}
	if m.Receipts > 1 {
		t.row.Duplicated++
		t.row.ExtraDeliveries += int(m.Receipts - 1)
	}
}

// Row returns the row of what was added, named name. It sorts the
// tally's lateness values in place; add nothing after it.
func (t *Tally) Row(name string) Row {
	row := t.row
	row.Name = name
	row.Lateness = Summarize(t.late)
	row.BrokerLateness = Summarize(t.visible)
	row.SendRate = Rate(row.Sent, t.firstSent, t.lastSent)
	row.ReceiveRate = Rate(len(t.late), t.firstArr, t.lastArr)
	if t.lastArr > t.firstArr {
		row.ReceiveSpanS = float64(t.lastArr-t.firstArr) / 1e9
	}
	return row
}

// Herd returns the herd's report from HerdAt, given the row of the same
// messages (Row), with At as the instant to report.
func (t *Tally) Herd(total Row, at time.Time) HerdReport {
	h := HerdReport{At: at, Messages: total.Sent, SentAfterAt: t.sentAfterAt,
		AllArrived: total.Lost == 0 && total.Sent > 0, DrainRate: total.ReceiveRate}
	if t.lastArr != 0 {
		h.FirstAfterMs = NsToMs(t.firstArr - t.HerdAt)
		h.LastAfterMs = NsToMs(t.lastArr - t.HerdAt)
	}
	return h
}

// The ends of a run that count as finished: every acknowledged message
// arrived, or the wait after the last due time ran out (and what had not
// arrived is lost). Any other end (interrupted, an error) fails the run.
const (
	EndAllArrived = "all arrived"
	EndDeadline   = "deadline"
)

// Verdict lists why a run failed, empty when it passed: an acknowledged
// message lost, a message early by any amount, a run that did not finish
// (ended), or fewer messages acknowledged than the run asked for (want).
// deadline is how long the run waited after the last due time, for the
// message.
func Verdict(total Row, want int, ended, deadline string) []string {
	out := []string{}
	if total.Lost > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged messages lost (not received within %s after the last due time)", total.Lost, deadline))
	}
	if total.Early > 0 {
		out = append(out, fmt.Sprintf("%d messages arrived early (up to %.3f ms before their due time)", total.Early, total.EarlyMaxMs))
	}
	if ended != EndAllArrived && ended != EndDeadline {
		out = append(out, "the run did not finish: "+ended)
	}
	if total.Sent < want {
		out = append(out, fmt.Sprintf("only %d of %d messages were acknowledged", total.Sent, want))
	}
	return out
}

// earliest is the smaller of a and b, where 0 means "none yet".
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
