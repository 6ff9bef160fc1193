package kafkabench

import (
	"context"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
func runForwarder(ctx context.Context, c config, prefix string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	tierOf := map[string]int64{}
	var topics []string
	for _, t := range c.tiers {
		name := levelTopic(prefix, t)
		topics = append(topics, name)
		tierOf[name] = t.Milliseconds()
	}
	type tp struct {
		topic string
		part  int32
	}
	var mu sync.Mutex
	paused := map[tp]int64{} // partition -> due time of its head
	cl, err := kgo.NewClient(
		seeds(c.brokers),
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
			mu.Lock()
			for t, ps := range rev {
				for _, p := range ps {
					delete(paused, tp{t, p})
				}
			}
			mu.Unlock()
			_ = cl.CommitMarkedOffsets(ctx)
		}),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		now := time.Now().UnixMilli()
		wait := 100 * time.Millisecond
		resume := map[string][]int32{}
		mu.Lock()
		for k, due := range paused {
			if due <= now {
				resume[k.topic] = append(resume[k.topic], k.part)
				delete(paused, k)
			} else if d := time.Duration(due-now) * time.Millisecond; d < wait {
				wait = d
			}
		}
		mu.Unlock()
		if len(resume) > 0 {
			cl.ResumeFetchPartitions(resume)
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollFetches(pctx)
		cancel()
		now = time.Now().UnixMilli()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			key := tp{p.Topic, p.Partition}
			mu.Lock()
			_, isPaused := paused[key]
			mu.Unlock()
			if isPaused {
				return
			}
			for _, r := range p.Records {
				due := r.Timestamp.UnixMilli() + tierOf[r.Topic]
				if due > now {
					cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
					cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{r.Topic: {r.Partition: {Epoch: -1, Offset: r.Offset}}})
					mu.Lock()
					paused[key] = due
					mu.Unlock()
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
		})
	}
	return nil
}
