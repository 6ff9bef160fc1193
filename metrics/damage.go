package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-mq/hourglass/engine"
)

// damageCollector exports what the engine knows of damage in its commit
// log and what its scrub has read (engine/damage.go, engine/scrub.go), and
// whether /healthz says degraded.
type damageCollector struct {
	eng                                   *engine.Engine
	segments, ranges, setAside, degraded  *prometheus.Desc
	scrubBytes, scrubPasses, scrubLastRun *prometheus.Desc
}

func newDamageCollector(eng *engine.Engine) *damageCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, nil, nil)
	}
	return &damageCollector{
		eng:          eng,
		segments:     d("damaged_segments", "Retained commit-log segments known to hold damage (found by the scrub, or by a read that set a message aside): run hourglass check, then hourglass repair."),
		ranges:       d("damaged_ranges", "Damaged byte ranges the scrub found in sealed commit-log segments."),
		setAside:     d("damaged_records", "Messages a consumer group passed over because their records were damaged (answered data_loss), since the start or replayed from the log."),
		degraded:     d("degraded", "1 while /healthz answers degraded: fire records or checkpoints failing (a full disk), or damage in the log."),
		scrubBytes:   d("scrub_bytes_total", "Commit-log bytes the scrub read."),
		scrubPasses:  d("scrub_passes_total", "Complete scrub passes over the sealed segments."),
		scrubLastRun: d("scrub_last_pass_timestamp_seconds", "When the last complete scrub pass ended (Unix seconds); 0 before the first."),
	}
}

// Describe implements prometheus.Collector.
func (c *damageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.segments, c.ranges, c.setAside, c.degraded, c.scrubBytes, c.scrubPasses, c.scrubLastRun} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *damageCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	r := c.eng.Damage()
	gauge(c.segments, float64(r.Segments()))
	gauge(c.ranges, float64(len(r.Ranges)))
	gauge(c.setAside, float64(r.SetAsideTotal))
	degraded := 0.0
	if len(c.eng.Degraded()) > 0 {
		degraded = 1
	}
	gauge(c.degraded, degraded)
	s := c.eng.Scrub()
	ch <- prometheus.MustNewConstMetric(c.scrubBytes, prometheus.CounterValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(c.scrubPasses, prometheus.CounterValue, float64(s.Passes))
	gauge(c.scrubLastRun, float64(s.LastPass)/1000)
}
