package kafkamode

import (
	"bytes"
	"container/heap"
	"hash/fnv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// entry is one pending delay record in the worker's index. Far from its due
// time it holds no body (rec is nil): only its partition, offset, due time
// and a hash of its key, so the index costs the same per message whatever
// the body size: about 92 bytes with its slots in the due heap, the body
// heap and the partition's pending list (see TestEntryCost).
type entry struct {
	pp      *partProgress
	offset  int64
	due     int64  // Unix ms; 0 for a control or dead-letter record
	ts      int64  // the record's timestamp, Unix ms: retention counts from it
	keyHash uint64 // FNV-1a of the record key, for cancel by key
	// back is how far before offset its message was first sent: for a
	// copy forward, offset minus its original's offset (through every
	// copy); 0 for a record sent by a producer. It is learnt from the
	// copy records when the copy is read and then travels with the entry
	// (spill, snapshot), so a cancel naming the original still reaches
	// the copy once its copy record is pruned.
	back int64
	// rec is the delay record, or nil while the body is not loaded.
	rec *kgo.Record
	// ctl is set for a record that is not forwarded: a dead letter or a
	// cancel.
	ctl *control
	// loading is set while the body loader fetches rec.
	loading bool
	// forwarded is set, in at-least-once mode, once Kafka acknowledged
	// the entry's forward (forwardFirst); its progress then commits in a
	// transaction that does not forward it again, even after an abort.
	forwarded bool
	// inBatch is set while the entry is in a transaction not yet ended.
	inBatch bool
	// cancelled is set on the target of a cancel in the transaction in
	// progress; done once that transaction committed.
	cancelled, done bool
	// copy is set when the record must be copied forward (re-produced
	// to the delay topic) before retention deletes it; the next
	// transaction that takes it copies instead of forwarding.
	copy bool
}

// tsHeap orders entries by record timestamp: the copy-forward queue.
type tsHeap []*entry

func (h tsHeap) Len() int           { return len(h) }
func (h tsHeap) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h tsHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *tsHeap) Push(x any)        { *h = append(*h, x.(*entry)) }
func (h *tsHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

// control is what an entry that is not forwarded does instead.
type control struct {
	// dlqReason is set for a record that goes to the dead-letter topic.
	dlqReason string
	// dropBody sends the dead letter without the record's value: Kafka
	// refused even the dead letter for its size.
	dropBody bool
	// bare sends the dead letter with no key or headers either: Kafka
	// refused it without its body too.
	bare bool
	// given up: Kafka refused even the bare dead letter; the entry is
	// resolved with no output, logged and counted (Stats.Refused).
	givenUp bool
	// cancel is set for a cancel record.
	cancel *cancelSpec
	// keepOwn is set for the cancel half of a reschedule: the record is
	// also scheduled (another entry), so resolving this entry must not
	// resolve the record's offset.
	keepOwn bool
	// sched is, for the cancel half of a reschedule, the scheduled half.
	// It is forwarded only if the cancel replaced something: a reschedule
	// whose message was forwarded (or cancelled) before it was read would
	// otherwise deliver the message a second time. Its body is kept until
	// the cancel half has run, so that it can be dead-lettered then.
	sched *entry
}

// isCancel reports whether e is a cancel entry (a cancel record, or the
// cancel half of a reschedule).
func (e *entry) isCancel() bool { return e.ctl != nil && e.ctl.cancel != nil }

// live reports whether e still belongs to an owned partition.
func (e *entry) live() bool { return !e.pp.dropped.Load() && !e.done }

// dlqReason is the dead-letter reason of e, or "".
func (e *entry) dlqReason() string {
	if e.ctl == nil {
		return ""
	}
	return e.ctl.dlqReason
}

// keyHash is the FNV-1a hash of a record key. A cancel by key matches
// entries by this hash: two different keys of one partition that collide
// (odds about 2^-64 per pair) would both be cancelled.
func keyHash(key []byte) uint64 {
	h := fnv.New64a()
	h.Write(key)
	return h.Sum64()
}

// dueHeap orders entries by due time, then partition and offset (so a herd
// due at one instant goes out in log order), then a reschedule's cancel
// half before its scheduled half: the two share partition and offset, and
// with _deliverAt=0 their due time too, and the scheduled half must never
// go out before the cancel half has settled it. The order is total.
type dueHeap []*entry

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.due != b.due {
		return a.due < b.due
	}
	if a.pp.partition != b.pp.partition {
		return a.pp.partition < b.pp.partition
	}
	if a.offset != b.offset {
		return a.offset < b.offset
	}
	return a.isCancel() && !b.isCancel()
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(*entry)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

func (h *dueHeap) push(e *entry) { heap.Push(h, e) }
func (h *dueHeap) pop() *entry   { return heap.Pop(h).(*entry) }

// peek returns the earliest live entry, dropping dead ones from the top
// (entries of revoked partitions are removed lazily).
func (h *dueHeap) peek() *entry {
	for len(*h) > 0 {
		if e := (*h)[0]; e.live() {
			return e
		}
		h.pop()
	}
	return nil
}

// detach copies what the worker keeps of a fetched record (key, value,
// headers, timestamp, position) out of the fetch buffer: a record's slices
// point into the buffer of the whole fetch response, so keeping one record
// of a fetch would keep all of it (megabytes) until the record fires.
func detach(r *kgo.Record) *kgo.Record {
	out := &kgo.Record{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value),
	}
	if len(r.Headers) > 0 {
		out.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = kgo.RecordHeader{Key: strings.Clone(h.Key), Value: bytes.Clone(h.Value)}
		}
	}
	return out
}
