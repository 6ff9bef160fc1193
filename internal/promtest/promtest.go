// Package promtest reads a Prometheus collector's series in tests, so
// that each package's metrics test checks values rather than walking
// the client library's protobuf types itself.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Values gathers cs into a map from "name/label values..." (the label
// values in the order of their names) to the series' value; a
// histogram's is its sample count.
func Values(t testing.TB, cs ...prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			key := mf.GetName()
			for _, l := range m.Label {
				key += "/" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				got[key] = float64(m.Histogram.GetSampleCount())
			case m.Gauge != nil:
				got[key] = m.Gauge.GetValue()
			}
		}
	}
	return got
}
