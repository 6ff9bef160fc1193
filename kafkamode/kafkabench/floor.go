package kafkabench

import (
	"container/heap"
	"context"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runFloor is the exactly-once floor, the baseline a Kafka-transactional
// delay forwarder cannot beat on a given cluster: a bare loop that
// consumes the delay topic (messages as hourglass gets them: _delayMs
// after the record timestamp), holds each record in RAM until it is due,
// and forwards what is due in one transaction with the consumed offsets
// (GroupTransactSession), then waits until the coordinator has completed
// that transaction before it starts the next. It keeps no progress of its
// own (it commits past records still held in RAM, so a crash loses
// them): it measures Kafka's exactly-once cost, not a design.
func runFloor(ctx context.Context, brokers, prefix string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	txnID := prefix + "-floor"
	s, err := kgo.NewGroupTransactSession(
		Seeds(brokers),
		kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(prefix),
		kgo.ConsumeTopics(prefix+".delay"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(6*time.Second),
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.ProducerLinger(0),
		kgo.MetadataMinAge(20*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer s.Close()
	var held floorHeap
	// read is one past the last offset consumed of each partition: every
	// transaction commits it. kgo's session takes the KIP-447 path only
	// after a TxnOffsetCommit; one with no offsets to commit would sleep
	// 500 ms (hourglass rewrites its commit the same way).
	read := map[int32]int64{}
	commitRead := func(req *kmsg.TxnOffsetCommitRequest) error {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = prefix + ".delay"
		for p, o := range read {
			pp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			pp.Partition, pp.Offset, pp.LeaderEpoch = p, o, -1
			t.Partitions = append(t.Partitions, pp)
		}
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{t}
		return nil
	}
	for ctx.Err() == nil {
		pollHeld(ctx, s.PollRecords, &held, func(r *kgo.Record) { read[r.Partition] = r.Offset + 1 })
		now := time.Now().UnixMilli()
		if len(held) == 0 || held[0].due > now {
			continue
		}
		if err := s.Begin(); err != nil {
			return err
		}
		for len(held) > 0 && held[0].due <= now {
			in := heap.Pop(&held).(floorRec).r
			out := &kgo.Record{Topic: headerOf(in, "_bizTopic"), Key: in.Key, Value: in.Value}
			s.Produce(ctx, out, nil)
		}
		if _, err := s.End(kgo.PreTxnCommitFnContext(ctx, commitRead), kgo.TryCommit); err != nil {
			return err
		}
		awaitComplete(ctx, s.Client(), txnID)
	}
	return nil
}

// awaitComplete asks the coordinator until the transaction of txnID is
// past PrepareCommit, for at most 100 ms.
func awaitComplete(ctx context.Context, cl *kgo.Client, txnID string) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{txnID}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.TransactionStates) != 1 || kerr.ErrorForCode(resp.TransactionStates[0].ErrorCode) != nil {
			return
		}
		if st := resp.TransactionStates[0].State; st != "PrepareCommit" && st != "PrepareAbort" {
			return
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// pollHeld is one read of a floor's loop: it takes what the consumer has
// buffered or, with nothing buffered, waits for records until the first
// held record is due (at most 50 ms), and holds each record it read until
// its due time (its timestamp plus _delayMs), after passing it to seen.
func pollHeld(ctx context.Context, poll func(context.Context, int) kgo.Fetches, held *floorHeap, seen func(*kgo.Record)) {
	wait := 50 * time.Millisecond
	if len(*held) > 0 {
		wait = min(wait, time.Until(time.UnixMilli((*held)[0].due)))
	}
	fs := poll(nil, 10000) //nolint:staticcheck // nil: what is buffered, no wait
	if fs.NumRecords() == 0 && wait > 0 {
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs = poll(pctx, 10000)
		cancel()
	}
	fs.EachRecord(func(r *kgo.Record) {
		seen(r)
		d, _ := strconv.ParseInt(headerOf(r, "_delayMs"), 10, 64)
		heap.Push(held, floorRec{due: r.Timestamp.UnixMilli() + d, r: r})
	})
}

func headerOf(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// floorRec is a record held until due; floorHeap orders them by due time.
type floorRec struct {
	due int64
	r   *kgo.Record
}

type floorHeap []floorRec

func (h floorHeap) Len() int           { return len(h) }
func (h floorHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h floorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *floorHeap) Push(x any)        { *h = append(*h, x.(floorRec)) }
func (h *floorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
