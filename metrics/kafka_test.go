package metrics

import (
	"testing"

	"github.com/hourglass-mq/hourglass/internal/promtest"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaCollectorFollowsTheWorker: the collector reports the worker's
// counters and lateness histogram as they are at scrape time (the e2e
// test of Kafka mode scrapes a real worker).
func TestKafkaCollectorFollowsTheWorker(t *testing.T) {
	w := idleWorker(t)
	st := w.Stats()
	st.Forwarded.Add(5)
	st.Committed.Add(2)
	st.Aborted.Add(1)
	st.Lateness.Observe(0.004)
	st.Spilled.Store(7)
	st.SpillErrors.Add(3)
	st.FencedDeparted.Add(4)
	got := promtest.Values(t, NewKafkaCollector(w))
	want := map[string]float64{
		"hourglass_kafka_forwarded_total":              5,
		"hourglass_kafka_transactions_total/committed": 2,
		"hourglass_kafka_transactions_total/aborted":   1,
		"hourglass_kafka_lateness_seconds":             1,
		"hourglass_kafka_spilled":                      7,
		"hourglass_kafka_spill_errors_total":           3,
		"hourglass_kafka_fenced_departed_total":        4,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// idleWorker returns a Kafka mode worker that is never run: its counters
// are set by hand.
func idleWorker(t *testing.T) *kafkamode.Worker {
	t.Helper()
	cfg := kafkamode.DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	w, err := kafkamode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
