package kafkahttp

import "testing"

// TestLockPartitionBounded: the lock that serializes a partition's changes
// is taken before the partition is known to exist, for any partition
// number a request names (up to 2^31). Taking it for a partition not seen
// before must cost no more than taking it again: a client naming a new
// partition in every request (DELETE /v1/messages/k:<p>:0) grew the
// handler's memory for good, a mutex and a map entry each.
func TestLockPartitionBounded(t *testing.T) {
	h := newTestHandler(t, "", nil)
	same := testing.AllocsPerRun(1000, func() { h.lockPartition(7)() })
	var p int32
	fresh := testing.AllocsPerRun(1000, func() {
		p++
		h.lockPartition(p)()
	})
	if fresh > same {
		t.Errorf("lockPartition allocates %v times for a partition not seen before, %v for one seen before", fresh, same)
	}
}
