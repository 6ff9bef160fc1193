package kafkamode

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hourglass-mq/hourglass/engine"
)

// TestRTTHookSortsRequests checks that the hook files each round trip of a
// transaction's request kinds under its own histogram and ignores other
// kinds and failed requests.
func TestRTTHookSortsRequests(t *testing.T) {
	s := newStages()
	h := &rttHook{s: &s}
	ok := kgo.BrokerE2E{TimeToWrite: time.Millisecond, ReadWait: 2 * time.Millisecond}
	h.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.Produce), ok)
	h.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.EndTxn), ok)
	h.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.EndTxn), ok)
	h.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.Fetch), ok)
	h.OnBrokerE2E(kgo.BrokerMetadata{}, int16(kmsg.Heartbeat), kgo.BrokerE2E{ReadErr: errors.New("reset")})
	for name, c := range map[string]struct {
		h    *engine.Histogram
		want uint64
	}{"produce": {s.Produce, 1}, "end txn": {s.EndTxn, 2}, "heartbeat": {s.Heartbeat, 0}, "offset commit": {s.TxnOffsetCommit, 0}} {
		if _, n, _ := c.h.Snapshot(); n != c.want {
			t.Errorf("%s: %d observations, want %d", name, n, c.want)
		}
	}
	if got := s.EndTxn.Quantile(0.5); got != 0.003 {
		t.Errorf("end txn p50 bucket %v s, want the 3 ms bucket", got)
	}
	if d := time.Duration(h.last[0].Load()); d != 3*time.Millisecond {
		t.Errorf("last produce round trip %v, want 3ms", d)
	}
}
