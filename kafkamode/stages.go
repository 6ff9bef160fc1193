package kafkamode

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hourglass-mq/hourglass/engine"
)

// StageBounds are the bucket bounds (seconds) of the stage histograms:
// finer than engine.LatenessBounds between 1 and 50 ms, where a
// transaction's steps lie, so a quantile read from them says which step
// costs what.
var StageBounds = []float64{0.00025, 0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01,
	0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 5}

// Stages is where a forward's time goes, one observation per committed or
// aborted transaction (the Kafka requests: one per request of the
// transaction's client, including those of a transaction that aborted).
// All histograms are in seconds, with StageBounds.
//
// A record due at t waits Wait (the loop was in the previous transaction,
// or in the gap after it, or asleep), then Flush (its produce and the
// markers' produce), then End (the offset commit, kgo's heartbeat, EndTxn);
// a read_committed consumer sees it once the broker has written the
// commit markers after EndTxn, which no worker-side figure includes.
type Stages struct {
	// Wait is (transaction start - due time of its oldest record).
	Wait *engine.Histogram
	// Flush is from the transaction's start until every produce of it
	// was acknowledged; End is from then until EndTxn was answered.
	Flush, End *engine.Histogram
	// Settle is from EndTxn's answer until the coordinator reported the
	// transaction completed (its markers written: a read_committed
	// consumer can see the records); the next transaction waits for it.
	Settle *engine.Histogram
	// Round trips of the transaction client's requests, by kind.
	Produce, TxnOffsetCommit, Heartbeat, EndTxn *engine.Histogram
}

func newStages() Stages {
	h := func() *engine.Histogram { return engine.NewHistogram(StageBounds...) }
	return Stages{Wait: h(), Flush: h(), End: h(), Settle: h(), Produce: h(), TxnOffsetCommit: h(), Heartbeat: h(), EndTxn: h()}
}

// ms is a histogram's q-quantile in milliseconds, for the log.
func ms(h *engine.Histogram, q float64) float64 { return h.Quantile(q) * 1000 }

// summary is the stages' p50 and p99 as log attributes.
func (s *Stages) summary() []any {
	var out []any
	for _, st := range []struct {
		name string
		h    *engine.Histogram
	}{{"wait", s.Wait}, {"flush", s.Flush}, {"end", s.End}, {"settle", s.Settle}, {"produce_rtt", s.Produce},
		{"txn_offset_commit_rtt", s.TxnOffsetCommit}, {"heartbeat_rtt", s.Heartbeat}, {"end_txn_rtt", s.EndTxn}} {
		out = append(out, st.name+"_p50_ms", ms(st.h, 0.5), st.name+"_p99_ms", ms(st.h, 0.99))
	}
	return out
}

// rttHook is a kgo hook on the transaction client: it puts each answered
// request of the kinds a transaction makes into its histogram, and keeps
// the latest round trip of each kind for the per-transaction debug line.
// kgo calls it on its connection goroutines.
type rttHook struct {
	s    *Stages
	last [4]atomic.Int64 // ns: produce, TxnOffsetCommit, heartbeat, EndTxn
}

var _ kgo.HookBrokerE2E = (*rttHook)(nil)

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (h *rttHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if e2e.WriteErr != nil || e2e.ReadErr != nil {
		return
	}
	var hist *engine.Histogram
	var i int
	switch kmsg.Key(key) {
	case kmsg.Produce:
		hist, i = h.s.Produce, 0
	case kmsg.TxnOffsetCommit:
		hist, i = h.s.TxnOffsetCommit, 1
	case kmsg.Heartbeat:
		hist, i = h.s.Heartbeat, 2
	case kmsg.EndTxn:
		hist, i = h.s.EndTxn, 3
	default:
		return
	}
	d := e2e.DurationE2E()
	hist.Observe(d.Seconds())
	h.last[i].Store(int64(d))
}

// lastRTTs returns the latest round trip of each kind, as debug-log
// attributes.
func (h *rttHook) lastRTTs() []any {
	d := func(i int) time.Duration { return time.Duration(h.last[i].Load()) }
	return []any{"produce_rtt", d(0), "txn_offset_commit_rtt", d(1), "heartbeat_rtt", d(2), "end_txn_rtt", d(3)}
}
