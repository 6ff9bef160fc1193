package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// KafkaCollector is a prometheus.Collector over one Kafka mode worker: the
// same lateness histogram as the embedded engine, pending records per
// delay partition it owns, and transaction and rebalance counters. Series
// are named hourglass_kafka_*.
type KafkaCollector struct {
	w *kafkamode.Worker

	forwarded, deadLettered, cancelled, read, refused *prometheus.Desc
	txns, partitions, rejoins                         *prometheus.Desc
	lateness, pending                                 *prometheus.Desc
	snapshots, takeoverRead, copied                   *prometheus.Desc
	partLateness                                      *prometheus.Desc
	spilled, spillLoaded, spillErrors                 *prometheus.Desc
	cancelsDeferred, fencedDeparted                   *prometheus.Desc
}

// NewKafkaCollector returns a collector over w.
func NewKafkaCollector(w *kafkamode.Worker) *KafkaCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "kafka", name), help, labels, nil)
	}
	return &KafkaCollector{
		w:            w,
		forwarded:    d("forwarded_total", "Records forwarded to their business topic in committed transactions."),
		deadLettered: d("dead_lettered_total", "Records sent to the dead-letter topic in committed transactions."),
		refused:      d("refused_total", "Outputs Kafka refused for good (missing or invalid topic, too large, not allowed), dead-lettered instead."),
		cancelled:    d("cancelled_total", "Pending records cancelled in committed transactions."),
		read:         d("records_read_total", "Delay-topic records read and indexed (first reads only)."),
		txns:         d("transactions_total", "Transactions ended, by result.", "result"),
		partitions:   d("rebalance_partitions_total", "Delay partitions assigned or revoked (lost included), summed over rebalances.", "event"),
		rejoins:      d("rejoins_total", "Group sessions rebuilt after a failed transaction."),
		lateness:     d("lateness_seconds", "Time from a record's due time to the start of the transaction that forwarded it."),
		pending:      d("pending", "Records read and not yet resolved, per delay partition this worker owns.", "partition"),
		snapshots:    d("snapshots_total", "Partition snapshots of the pending index written in committed transactions."),
		takeoverRead: d("takeover_records_read_total", "Delay records re-read when taking partitions over (below their end offset at assignment)."),
		copied:       d("copied_forward_total", "Pending records copied forward in the delay topic before retention would delete them."),
		partLateness: d("partition_lateness_seconds", "hourglass_kafka_lateness_seconds per delay partition.", "partition"),
		spilled:      d("spilled", "Pending entries in the local spill files (due beyond the near window)."),
		spillLoaded:  d("spill_loaded_total", "Spilled entries taken back into RAM."),
		spillErrors:  d("spill_errors_total", "Entries kept in RAM because a spill write failed, plus spill reads that failed (each rebuilds the index from Kafka)."),
		cancelsDeferred: d("cancels_deferred_total",
			"Cancels that waited for a copy forward of the worker's own to be read back, so that they reach the message it carries on."),
		fencedDeparted: d("fenced_departed_total",
			"Open transactions of workers that left the group, aborted at a rebalance by fencing their transactional IDs (rather than at their timeout)."),
	}
}

// Describe implements prometheus.Collector.
func (c *KafkaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.forwarded, c.deadLettered, c.refused, c.cancelled, c.read, c.txns, c.partitions, c.rejoins, c.lateness, c.pending,
		c.snapshots, c.takeoverRead, c.copied, c.partLateness, c.spilled, c.spillLoaded, c.spillErrors, c.cancelsDeferred, c.fencedDeparted} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *KafkaCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.w.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.forwarded, st.Forwarded.Load())
	counter(c.deadLettered, st.DeadLettered.Load())
	counter(c.refused, st.Refused.Load())
	counter(c.cancelled, st.Cancelled.Load())
	counter(c.read, st.RecordsRead.Load())
	counter(c.txns, st.Committed.Load(), "committed")
	counter(c.txns, st.Aborted.Load(), "aborted")
	counter(c.partitions, st.Assigned.Load(), "assigned")
	counter(c.partitions, st.Revoked.Load(), "revoked")
	counter(c.rejoins, st.Rejoins.Load())
	ch <- histogram(c.lateness, st.Lateness)
	counter(c.snapshots, st.Snapshots.Load())
	counter(c.takeoverRead, st.TakeoverRecordsRead.Load())
	counter(c.copied, st.CopiedForward.Load())
	ch <- prometheus.MustNewConstMetric(c.spilled, prometheus.GaugeValue, float64(st.Spilled.Load()))
	counter(c.spillLoaded, st.SpillLoaded.Load())
	counter(c.spillErrors, st.SpillErrors.Load())
	counter(c.cancelsDeferred, st.CancelsDeferred.Load())
	counter(c.fencedDeparted, st.FencedDeparted.Load())
	for p, h := range st.PartitionLateness() {
		ch <- histogram(c.partLateness, h, strconv.Itoa(int(p)))
	}
	for p, n := range c.w.Pending() {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), strconv.Itoa(int(p)))
	}
}

// KafkaHandler serves w's metrics, plus the Go runtime's and the process's,
// from a registry of its own.
func KafkaHandler(w *kafkamode.Worker) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewKafkaCollector(w), NewKafkaStagesCollector(w), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
