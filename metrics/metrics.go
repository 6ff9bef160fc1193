// Package metrics exports an engine's instrumentation in the Prometheus
// format. It is a separate package so the engine does not depend on the
// Prometheus client: the engine keeps plain atomic counters and histograms
// (engine.Stats), and a Collector reads them at scrape time.
//
// Counters count since the process started (Prometheus handles the reset at
// a restart); gauges are read live. Per-topic and per-group series carry the
// labels topic and group.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/internal/buildinfo"
)

const ns = "hourglass"

// Collector is a prometheus.Collector over one engine.
type Collector struct {
	eng *engine.Engine

	sent, fired, cancelled, rescheduled *prometheus.Desc
	pending                             *prometheus.Desc
	lateness, fsync, checkpoint         *prometheus.Desc
	recovery, replayed                  *prometheus.Desc
	clockJumps, checkpoints, segsDel    *prometheus.Desc
	fireErrs, loadErrs, ckErrs          *prometheus.Desc
	preallocErrs                        *prometheus.Desc
	failed, readErrs, rebuilds          *prometheus.Desc
	retentionSkipped                    *prometheus.Desc
	buildInfo                           *prometheus.Desc
	dedupHits, dedupConflicts           *prometheus.Desc
	expired, windowMissed               *prometheus.Desc
	clockHeld                           *prometheus.Desc

	topicSent, topicFired, topicCancelled, topicPending, topicVisible *prometheus.Desc

	groupDelivered, groupAcked, groupRedelivered, groupDead *prometheus.Desc
	groupBacklog, groupInFlight                             *prometheus.Desc

	forecast *forecastCollector // due soon and disk use (forecast.go)
	damage   *damageCollector   // damage, scrub and degraded (damage.go)
}

// NewCollector returns a collector over eng.
func NewCollector(eng *engine.Engine) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	return &Collector{
		eng:              eng,
		forecast:         newForecastCollector(eng),
		damage:           newDamageCollector(eng),
		sent:             d("messages_sent_total", "Messages accepted by sends."),
		fired:            d("messages_fired_total", "Messages that fell due and became visible to consumers (delivered to their queue)."),
		cancelled:        d("messages_cancelled_total", "Pending messages cancelled."),
		rescheduled:      d("messages_rescheduled_total", "Pending messages moved to another due time."),
		pending:          d("messages_pending", "Messages accepted and not yet visible or cancelled."),
		lateness:         d("lateness_seconds", "Time from a message's due time to its becoming visible."),
		fsync:            d("fsync_seconds", "Duration of each commit-log fdatasync."),
		checkpoint:       d("checkpoint_seconds", "Duration of each checkpoint."),
		recovery:         d("recovery_seconds", "Duration of the recovery at the last start."),
		replayed:         d("recovery_replayed_records", "Commit-log records replayed at the last start."),
		clockJumps:       d("clock_jumps_total", "Wall-clock steps beyond the threshold, relative to the monotonic clock."),
		checkpoints:      d("checkpoints_total", "Checkpoints written."),
		segsDel:          d("segments_deleted_total", "Commit-log segments deleted by retention."),
		fireErrs:         d("fire_errors_total", "Failures to write a fire record (due messages are retried)."),
		loadErrs:         d("timer_load_errors_total", "Failures to load a timer bucket into the wheel."),
		ckErrs:           d("checkpoint_errors_total", "Failed checkpoints."),
		preallocErrs:     d("prealloc_errors_total", "Failed preallocations of the next commit-log segment (nothing failed with them; segments are then created as needed)."),
		failed:           d("storage_failed", "1 once the broker stopped after a failed fsync (fail-stop); it then exits."),
		readErrs:         d("read_errors_total", "Message reads that failed with an I/O error while delivering; the messages stayed in place."),
		retentionSkipped: d("retention_skipped_total", "Messages a group was about to receive whose records retention had already removed: skipped, not delivered (-retention shorter than the group's lag)."),
		rebuilds:         d("cache_rebuilds_total", "Caches (timer buckets, key index) found damaged at the last recovery and rebuilt from the log."),
		buildInfo:        d("build_info", "Always 1; its labels say which build runs (as hourglass version prints it).", "version", "commit", "go_version"),

		dedupHits:      d("dedup_duplicates_total", "Sends answered as repeats of an earlier send's dedup_id: nothing stored."),
		dedupConflicts: d("dedup_conflicts_total", "Sends refused because their dedup_id was used with another body or delivery time."),
		expired:        d("expired_total", "Messages dead-lettered with reason expired: handed out to a consumer group after their deadline (counted per group)."),
		windowMissed:   d("window_missed_total", "Messages with a tolerance window made visible after their window ended."),
		clockHeld:      d("clock_held_seconds", "How far the broker clock is ahead of the wall clock: it holds still until the wall clock catches up (after a backward step, or a restart with the clock behind). 0 normally."),

		topicSent:      d("topic_messages_sent_total", "Messages accepted by sends, by topic.", "topic"),
		topicFired:     d("topic_messages_fired_total", "Messages that became visible, by topic.", "topic"),
		topicCancelled: d("topic_messages_cancelled_total", "Messages cancelled, by topic.", "topic"),
		topicPending:   d("topic_messages_pending", "Messages accepted and not yet visible or cancelled, by topic.", "topic"),
		topicVisible:   d("topic_queue_entries", "Entries in the topic's queues: every message made visible since the topic was created.", "topic"),

		groupDelivered:   d("group_delivered_total", "Deliveries to the consumer group (first deliveries and redeliveries).", "topic", "group"),
		groupAcked:       d("group_acked_total", "Messages acknowledged by the consumer group.", "topic", "group"),
		groupRedelivered: d("group_redelivered_total", "Redeliveries to the consumer group after a lease expiry or nack.", "topic", "group"),
		groupDead:        d("group_dead_lettered_total", "Messages moved to the group's dead-letter topic after max attempts.", "topic", "group"),
		groupBacklog:     d("group_backlog", "Visible messages the group has not acked yet, in flight included.", "topic", "group"),
		groupInFlight:    d("group_in_flight", "Messages of the group under a lease now.", "topic", "group"),
	}
}

func (c *Collector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		c.sent, c.fired, c.cancelled, c.rescheduled, c.pending, c.lateness, c.fsync, c.checkpoint,
		c.recovery, c.replayed, c.clockJumps, c.checkpoints, c.segsDel, c.fireErrs, c.loadErrs, c.ckErrs,
		c.preallocErrs, c.failed, c.readErrs, c.rebuilds, c.retentionSkipped, c.buildInfo,
		c.dedupHits, c.dedupConflicts, c.expired, c.windowMissed, c.clockHeld,
		c.topicSent, c.topicFired, c.topicCancelled, c.topicPending, c.topicVisible,
		c.groupDelivered, c.groupAcked, c.groupRedelivered, c.groupDead, c.groupBacklog, c.groupInFlight,
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
	c.forecast.Describe(ch)
	c.damage.Describe(ch)
}

// Collect implements prometheus.Collector: it reads the engine's
// statistics, then every topic and its groups.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.eng.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.sent, s.Sent.Load())
	counter(c.fired, s.Fired.Load())
	counter(c.cancelled, s.Cancelled.Load())
	counter(c.rescheduled, s.Rescheduled.Load())
	gauge(c.pending, float64(s.Pending.Load()))
	ch <- histogram(c.lateness, s.Lateness)
	ch <- histogram(c.fsync, s.FsyncSeconds)
	ch <- histogram(c.checkpoint, s.CheckpointSeconds)
	gauge(c.recovery, s.RecoveryDuration())
	gauge(c.replayed, float64(s.Replayed.Load()))
	counter(c.clockJumps, s.ClockJumps.Load())
	counter(c.checkpoints, s.Checkpoints.Load())
	counter(c.segsDel, s.SegmentsDeleted.Load())
	counter(c.fireErrs, s.FireErrors.Load())
	counter(c.loadErrs, s.TimerLoadErrors.Load())
	counter(c.ckErrs, s.CheckpointErrors.Load())
	counter(c.preallocErrs, s.PreallocErrors.Load())
	failed := 0.0
	if s.Failed.Load() {
		failed = 1
	}
	gauge(c.failed, failed)
	counter(c.readErrs, s.ReadErrors.Load())
	counter(c.retentionSkipped, s.RetentionSkipped.Load())
	counter(c.rebuilds, s.CacheRebuilds.Load())
	counter(c.dedupHits, s.DedupHits.Load())
	counter(c.dedupConflicts, s.DedupConflicts.Load())
	counter(c.expired, s.Expired.Load())
	counter(c.windowMissed, s.WindowMissed.Load())
	gauge(c.clockHeld, c.eng.ClockHeld().Seconds())
	b := buildinfo.Get()
	gauge(c.buildInfo, 1, b.Version, b.Commit, b.GoVersion)
	c.forecast.Collect(ch)
	c.damage.Collect(ch)

	for _, t := range c.eng.Topics() {
		ts, err := c.eng.DescribeTopic(t.Name)
		if err != nil {
			// Deleted between the two calls; nothing to report.
			continue
		}
		counter(c.topicSent, ts.Sent, ts.Name)
		counter(c.topicFired, ts.Fired, ts.Name)
		counter(c.topicCancelled, ts.Cancelled, ts.Name)
		gauge(c.topicPending, float64(ts.Pending), ts.Name)
		gauge(c.topicVisible, float64(ts.Visible), ts.Name)
		for _, g := range ts.Groups {
			counter(c.groupDelivered, g.Delivered, g.Topic, g.Name)
			counter(c.groupAcked, g.Acked, g.Topic, g.Name)
			counter(c.groupRedelivered, g.Redelivered, g.Topic, g.Name)
			counter(c.groupDead, g.DeadLettered, g.Topic, g.Name)
			gauge(c.groupBacklog, float64(g.Backlog), g.Topic, g.Name)
			gauge(c.groupInFlight, float64(g.InFlight), g.Topic, g.Name)
		}
	}
}

// histogram converts an engine histogram into a Prometheus one: the
// engine keeps per-bucket counts, Prometheus wants cumulative ones.
func histogram(d *prometheus.Desc, h *engine.Histogram, labels ...string) prometheus.Metric {
	counts, n, sum := h.Snapshot()
	buckets := make(map[float64]uint64, len(h.Bounds))
	var acc uint64
	for i, b := range h.Bounds {
		acc += counts[i]
		buckets[b] = acc
	}
	// The +Inf bucket is implied by the count. The count is read after the
	// buckets, so a concurrent Observe may make it larger than the last
	// bucket, which Prometheus allows (those observations are above it or
	// not yet counted in a bucket).
	if n < acc {
		n = acc
	}
	return prometheus.MustNewConstHistogram(d, n, sum, buckets, labels...)
}

// Handler returns an http.Handler serving eng's metrics, plus the Go
// runtime's and the process's, from a registry of its own.
func Handler(eng *engine.Engine) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(eng), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
