package main

import (
	"context"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode/kafkabench"
)

// runForwarder is the first seed's scheme C, the baseline: one topic per
// delay level; a record's due time is its timestamp plus its level's delay.
// The forwarder consumes every level topic in one group. When a
// partition's next record is not due, it pauses the partition, seeks back
// to that record and resumes the partition at its due time; a due record
// is produced to its _bizTopic (without that header) and its offset is
// marked for the periodic autocommit once the produce succeeded. At least
// once: a crash between a produce and the next commit forwards again.
//
// The resume is driven by a precise timer (sleep until the earliest
// paused head is due), not a fixed poll interval, so the comparison is
// with a good scheme C, not a sloppy one.
func runForwarder(ctx context.Context, brokers string, tiers []time.Duration, prefix string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	tierOf := map[string]int64{}
	var topics []string
	for _, t := range tiers {
		name := levelTopic(prefix, t)
		topics = append(topics, name)
		tierOf[name] = t.Milliseconds()
	}
	paused := &fwdPaused{m: map[fwdPart]int64{}}
	cl, err := kgo.NewClient(
		kafkabench.Seeds(brokers),
		kgo.ConsumerGroup(prefix),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(6*time.Second),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(time.Second),
		kgo.ProducerLinger(0),
		// A resumed partition joins the next fetch request; with the
		// default 5 s long poll that request may be a while coming.
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, rev map[string][]int32) {
			paused.forget(rev)
			_ = cl.CommitMarkedOffsets(ctx)
		}),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		resume, wait := paused.due(time.Now().UnixMilli())
		if len(resume) > 0 {
			cl.ResumeFetchPartitions(resume)
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollFetches(pctx)
		cancel()
		now := time.Now().UnixMilli()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			forwardPartition(ctx, cl, paused, tierOf, p, now)
		})
	}
	return nil
}

// fwdPart names one partition of a level topic.
type fwdPart struct {
	topic string
	part  int32
}

// fwdPaused holds the forwarder's paused partitions, each with the due time
// of its head record. The mutex is needed because the revoke callback runs
// on the client's goroutine.
type fwdPaused struct {
	mu sync.Mutex
	m  map[fwdPart]int64 // partition -> due time of its head
}

// forget drops the revoked partitions.
func (ps *fwdPaused) forget(rev map[string][]int32) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for t, parts := range rev {
		for _, p := range parts {
			delete(ps.m, fwdPart{t, p})
		}
	}
}

// due removes and returns the partitions whose head is due at now (unix ms),
// and how long to poll: at most 100 ms, less when a head falls due sooner.
func (ps *fwdPaused) due(now int64) (map[string][]int32, time.Duration) {
	wait := 100 * time.Millisecond
	resume := map[string][]int32{}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for k, due := range ps.m {
		if due <= now {
			resume[k.topic] = append(resume[k.topic], k.part)
			delete(ps.m, k)
		} else if d := time.Duration(due-now) * time.Millisecond; d < wait {
			wait = d
		}
	}
	return resume, wait
}

// isPaused says whether the partition is paused.
func (ps *fwdPaused) isPaused(k fwdPart) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, ok := ps.m[k]
	return ok
}

// pause records that k is paused until its head falls due.
func (ps *fwdPaused) pause(k fwdPart, due int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.m[k] = due
}

// forwardPartition produces the fetched records of one partition that are
// due to their business topic (named by the _bizTopic header), marking each
// for commit once produced. At the first record not yet due it pauses the
// partition and rewinds it to that record.
func forwardPartition(ctx context.Context, cl *kgo.Client, paused *fwdPaused, tierOf map[string]int64, p kgo.FetchTopicPartition, now int64) {
	key := fwdPart{p.Topic, p.Partition}
	if paused.isPaused(key) {
		return
	}
	for _, r := range p.Records {
		due := r.Timestamp.UnixMilli() + tierOf[r.Topic]
		if due > now {
			cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
			cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{r.Topic: {r.Partition: {Epoch: -1, Offset: r.Offset}}})
			paused.pause(key, due)
			return
		}
		out := &kgo.Record{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			if h.Key == "_bizTopic" {
				out.Topic = string(h.Value)
			} else {
				out.Headers = append(out.Headers, h)
			}
		}
		src := r
		cl.Produce(ctx, out, func(_ *kgo.Record, err error) {
			if err == nil {
				cl.MarkCommitRecords(src)
			}
		})
	}
}

// levelTopic is scheme C's topic for one delay tier.
func levelTopic(prefix string, tier time.Duration) string {
	return prefix + ".level." + strings.ReplaceAll(tier.String(), ".", "_")
}

// schemeC is the seed's scheme C as a system of the benchmark: a level
// topic per tier, the forwarder this command run again with -role
// forwarder. At least once, and it commits progress on a timer: it may
// duplicate at any time.
func schemeC() kafkabench.System {
	return kafkabench.System{
		Name: "schemec", Help: "the seed's scheme C: a topic per delay level, at least once",
		DupAlways: true,
		Route:     levelTopic,
		Prepare: func(env kafkabench.Env) (kafkabench.Start, error) {
			tiers := make([]string, len(env.Config.Tiers))
			for i, t := range env.Config.Tiers {
				if err := env.Create(levelTopic(env.Prefix, t), kafkabench.DelayPartitions, nil); err != nil {
					return nil, err
				}
				tiers[i] = t.String()
			}
			return func(int) (*kafkabench.Child, error) {
				args := append(append([]string{}, env.Reexec[1:]...), "-role", "forwarder", "-prefix", env.Prefix,
					"-brokers", env.Config.Brokers, "-tiers", strings.Join(tiers, ","))
				return kafkabench.StartChild(env.Reexec[0], args...)
			}, nil
		},
	}
}
