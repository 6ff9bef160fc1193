package kafkamode

import (
	"fmt"
	"strings"
	"testing"
)

// TestDeliveryConfig: exactly once is the default, at least once is
// taken, anything else is refused with the two choices named.
func TestDeliveryConfig(t *testing.T) {
	base := Config{Brokers: []string{"k:9092"}, DelayTopic: "d", Group: "g", WorkerID: "w", Partitions: 1, Replication: 1}
	c, err := base.withDefaults()
	if err != nil || c.Delivery != DeliveryExactlyOnce || c.atLeastOnce() {
		t.Fatalf("default: %q %v", c.Delivery, err)
	}
	base.Delivery = DeliveryAtLeastOnce
	if c, err := base.withDefaults(); err != nil || !c.atLeastOnce() {
		t.Fatalf("at-least-once: %q %v", c.Delivery, err)
	}
	base.Delivery = "maybe-once"
	if _, err := base.withDefaults(); err == nil || !strings.Contains(err.Error(), DeliveryAtLeastOnce) {
		t.Fatalf("a bad mode: %v", err)
	}
}

// TestMayRedeliver: only a record that was in the partition at its
// assignment and due by then (give or take the clock margin) may repeat
// a forward of the previous owner.
func TestMayRedeliver(t *testing.T) {
	pp := &partProgress{catchUp: 100, assignedAt: 1_000_000}
	margin := redeliveryMargin.Milliseconds()
	for _, c := range []struct {
		offset, due int64
		want        bool
	}{
		{99, 999_000, true},
		{99, 1_000_000 + margin, true},
		{99, 1_000_001 + margin, false}, // due after the take-over: never forwarded before
		{100, 999_000, false},           // written after the assignment
	} {
		if got := mayRedeliver(&entry{pp: pp, offset: c.offset, due: c.due}); got != c.want {
			t.Errorf("offset %d due %d: %v, want %v", c.offset, c.due, got, c.want)
		}
	}
}

// TestWorkerIDLength: a worker ID too long to name the worker's Kafka
// client is refused before the worker starts, saying how long it may be;
// one that just fits is taken.
func TestWorkerIDLength(t *testing.T) {
	base := Config{Brokers: []string{"k:9092"}, DelayTopic: "d", Group: "g", Partitions: 1, Replication: 1}
	most := maxClientID - len("g-~") - nonceLen
	base.WorkerID = strings.Repeat("w", most)
	if _, err := base.withDefaults(); err != nil {
		t.Fatalf("a worker ID of %d bytes: %v", most, err)
	}
	base.WorkerID += "w"
	if _, err := base.withDefaults(); err == nil || !strings.Contains(err.Error(), "worker ID") ||
		!strings.Contains(err.Error(), fmt.Sprintf("at most %d", most+1)) {
		t.Fatalf("a worker ID of %d bytes: %v, want refused, at most %d with the group", most+1, err, most+1)
	}
}

// TestWorkerIDPlain: a worker ID or group with a control character, invalid
// UTF-8 or white space at an end is refused, naming the setting; inner
// spaces, dots and non-ASCII letters are taken.
func TestWorkerIDPlain(t *testing.T) {
	base := Config{Brokers: []string{"k:9092"}, DelayTopic: "d", Group: "g", Partitions: 1, Replication: 1}
	for _, id := range []string{"w1", "pod-7.example", "wörker", "worker 1"} {
		base.WorkerID = id
		if _, err := base.withDefaults(); err != nil {
			t.Errorf("worker ID %q: %v", id, err)
		}
	}
	for _, id := range []string{" ", "w1 ", " w1", "a\nb", "a\x1b[31mb", "\xff", "a\tb", "a\u2028b"} {
		base.WorkerID = id
		if _, err := base.withDefaults(); err == nil || !strings.Contains(err.Error(), "worker ID") {
			t.Errorf("worker ID %q: %v, want refused naming the worker ID", id, err)
		}
	}
	base.WorkerID, base.Group = "w1", "g\n"
	if _, err := base.withDefaults(); err == nil || !strings.Contains(err.Error(), "group") {
		t.Errorf("group %q: %v, want refused naming the group", base.Group, err)
	}
}
