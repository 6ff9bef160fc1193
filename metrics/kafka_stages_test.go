package metrics

import (
	"testing"

	"github.com/hourglass-mq/hourglass/internal/promtest"
)

// TestKafkaStagesCollector: each stage and request kind is its own
// labelled histogram with the worker's observations at scrape time.
func TestKafkaStagesCollector(t *testing.T) {
	w := idleWorker(t)
	s := &w.Stats().Stages
	s.Wait.Observe(0.004)
	s.Settle.Observe(0.002)
	s.Settle.Observe(0.003)
	s.Heartbeat.Observe(0.0002)
	got := promtest.Values(t, NewKafkaStagesCollector(w))
	want := map[string]float64{
		"hourglass_kafka_transaction_stage_seconds/wait":        1,
		"hourglass_kafka_transaction_stage_seconds/flush":       0,
		"hourglass_kafka_transaction_stage_seconds/settle":      2,
		"hourglass_kafka_transaction_request_seconds/heartbeat": 1,
		"hourglass_kafka_transaction_request_seconds/produce":   0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d series, want 8 (4 stages, 4 request kinds): %v", len(got), got)
	}
}
