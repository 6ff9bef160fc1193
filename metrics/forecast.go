package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-mq/hourglass/engine"
)

// DueWindows are the windows of hourglass_due_next, by label.
var DueWindows = []struct {
	Label string
	D     time.Duration
}{{"1m", time.Minute}, {"1h", time.Hour}, {"24h", 24 * time.Hour}}

// forecastCollector exports what falls due soon and the data directory's
// size, computed at scrape time from the engine's forecast counts (a cost
// that does not grow with the pending messages) and file accounting.
type forecastCollector struct {
	eng       *engine.Engine
	dueNext   *prometheus.Desc
	diskBytes *prometheus.Desc
}

func newForecastCollector(eng *engine.Engine) *forecastCollector {
	return &forecastCollector{
		eng: eng,
		dueNext: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "due_next"),
			"Pending messages of every topic due within the window from now (overdue ones still waiting for dispatch included).",
			[]string{"window"}, nil),
		diskBytes: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "disk_bytes"),
			"Bytes of the data directory by part: log (retained commit-log records), timers (timer bucket entries), queues (queue index entries).",
			[]string{"part"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *forecastCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.dueNext
	ch <- c.diskBytes
}

// Collect implements prometheus.Collector.
func (c *forecastCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range DueWindows {
		ch <- prometheus.MustNewConstMetric(c.dueNext, prometheus.GaugeValue, float64(c.eng.DueWithin(w.D)), w.Label)
	}
	d := c.eng.DiskUsage()
	for part, v := range map[string]int64{"log": d.Log, "timers": d.Timers, "queues": d.Queues} {
		ch <- prometheus.MustNewConstMetric(c.diskBytes, prometheus.GaugeValue, float64(v), part)
	}
}
