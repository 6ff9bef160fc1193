package kafkabench

import (
	"container/heap"
	"context"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// aloFloorCommitEvery is how often the at-least-once floor commits the
// offsets of the records it forwarded: franz-go's least autocommit
// interval. hourglass commits every 50 ms at least once; a floor that
// commits half as often pays less commit traffic, so it stays a floor.
const aloFloorCommitEvery = 100 * time.Millisecond

// runFloorALO is the at-least-once floor, the baseline an at-least-once
// delay forwarder cannot beat on a given cluster: a bare loop that
// consumes the delay topic as runFloor does, holds each record in RAM
// until it is due, and then produces it at once with the idempotent
// producer (acks from all in-sync replicas, no linger), with no
// transaction. The offset of a record is marked for the periodic commit
// once its produce is acknowledged. Lateness at a consumer is then the
// timer's wake, one produce round trip and the consumer's fetch: what
// Kafka itself costs a forward. Like runFloor it keeps no progress of its
// own (records consumed and held past a commit of later offsets are lost
// by a crash): it measures the cluster, not a design.
func runFloorALO(ctx context.Context, brokers, prefix string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cl, err := kgo.NewClient(
		Seeds(brokers),
		kgo.ConsumerGroup(prefix),
		kgo.ConsumeTopics(prefix+".delay"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(6*time.Second),
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.ProducerLinger(0),
		kgo.AllowAutoTopicCreation(),
		kgo.MetadataMinAge(20*time.Millisecond),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(aloFloorCommitEvery),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	var held floorHeap
	acked := func(r *kgo.Record, err error) {
		if err == nil {
			cl.MarkCommitRecords(r.Context.Value(floorSource{}).(*kgo.Record))
		}
	}
	for ctx.Err() == nil {
		pollHeld(ctx, cl.PollRecords, &held, func(*kgo.Record) {})
		now := time.Now().UnixMilli()
		for len(held) > 0 && held[0].due <= now {
			in := heap.Pop(&held).(floorRec).r
			out := &kgo.Record{Topic: headerOf(in, "_bizTopic"), Key: in.Key, Value: in.Value,
				Context: context.WithValue(ctx, floorSource{}, in)}
			cl.Produce(ctx, out, acked)
		}
	}
	return nil
}

// floorSource is the context key of the consumed record a forward of the
// at-least-once floor came from.
type floorSource struct{}
