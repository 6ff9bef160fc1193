package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// KafkaStagesCollector exports where a Kafka mode worker's transactions
// spend their time (kafkamode.Stages): one histogram per step, by label,
// so a lateness figure can be split into waiting, producing, ending and
// the coordinator's completion.
type KafkaStagesCollector struct {
	w               *kafkamode.Worker
	stage, requests *prometheus.Desc
}

// NewKafkaStagesCollector returns a collector over w's transaction stages.
func NewKafkaStagesCollector(w *kafkamode.Worker) *KafkaStagesCollector {
	return &KafkaStagesCollector{
		w: w,
		stage: prometheus.NewDesc(prometheus.BuildFQName(ns, "kafka", "transaction_stage_seconds"),
			"Steps of the worker's transactions: wait (start - oldest due time), flush (produces acknowledged), end (offset commit, heartbeat, EndTxn), settle (EndTxn's answer until the coordinator completed the transaction).",
			[]string{"stage"}, nil),
		requests: prometheus.NewDesc(prometheus.BuildFQName(ns, "kafka", "transaction_request_seconds"),
			"Round trips of the transaction client's requests, by kind (heartbeat includes the group's periodic ones).",
			[]string{"request"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *KafkaStagesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stage
	ch <- c.requests
}

// Collect implements prometheus.Collector.
func (c *KafkaStagesCollector) Collect(ch chan<- prometheus.Metric) {
	s := &c.w.Stats().Stages
	for _, h := range []struct {
		d     *prometheus.Desc
		label string
		h     *engine.Histogram
	}{{c.stage, "wait", s.Wait}, {c.stage, "flush", s.Flush}, {c.stage, "end", s.End}, {c.stage, "settle", s.Settle},
		{c.requests, "produce", s.Produce}, {c.requests, "txn_offset_commit", s.TxnOffsetCommit},
		{c.requests, "heartbeat", s.Heartbeat}, {c.requests, "end_txn", s.EndTxn}} {
		ch <- histogram(h.d, h.h, h.label)
	}
}
