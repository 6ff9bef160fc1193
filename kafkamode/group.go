package kafkamode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// statePartitioner sends state-topic records to the partition set on them
// (the delay partition they describe), and so delay-topic records (copies
// forward, which stay in their partition), and partitions every other
// record by key, like the Java client.
type statePartitioner struct {
	state, delay string
	other        kgo.Partitioner
}

func (p statePartitioner) ForTopic(t string) kgo.TopicPartitioner {
	if t == p.state || t == p.delay {
		return kgo.ManualPartitioner().ForTopic(t)
	}
	return p.other.ForTopic(t)
}

// ensureTopics creates the delay, state and dead-letter topics that are
// missing, and checks that the state topic has a partition for each delay
// partition.
func (w *Worker) ensureTopics(ctx context.Context) error {
	adm := w.ses.admin()
	create := func(topic string, parts int32, configs map[string]*string) error {
		_, err := adm.CreateTopic(ctx, parts, w.cfg.Replication, configs, topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		return nil
	}
	td, err := adm.ListTopics(ctx, w.cfg.DelayTopic)
	if err != nil {
		return fmt.Errorf("describe topic %s: %w", w.cfg.DelayTopic, err)
	}
	n := w.cfg.Partitions
	if d, ok := td[w.cfg.DelayTopic]; ok && d.Err == nil {
		n = int32(len(d.Partitions))
	} else if err := create(w.cfg.DelayTopic, n, nil); err != nil {
		return err
	}
	compact := "compact"
	if err := create(w.cfg.StateTopic, n, map[string]*string{"cleanup.policy": &compact}); err != nil {
		return err
	}
	if err := create(w.cfg.DLQTopic, n, nil); err != nil {
		return err
	}
	// A topic just created may take a moment to show in the metadata.
	var got int32
	for try := 0; try < 40; try++ { // kgo may answer from metadata cached for up to 5 s
		td, err = adm.ListTopics(ctx, w.cfg.StateTopic)
		if err != nil {
			return fmt.Errorf("describe topic %s: %w", w.cfg.StateTopic, err)
		}
		if got = int32(len(td[w.cfg.StateTopic].Partitions)); got > 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got < n {
		// The delay topic grew while no worker ran: grow the state topic
		// to match (the new state partitions are empty, as the new delay
		// partitions have no progress yet).
		if err := w.growStateTopic(ctx, n); err != nil {
			return fmt.Errorf("state topic %s has %d partitions; the delay topic %s has %d and needs one state partition each: %w",
				w.cfg.StateTopic, got, w.cfg.DelayTopic, n, err)
		}
	}
	return nil
}

// errNoStatePartition says a delay partition has no state partition yet:
// the delay topic was given more partitions than the state topic has.
var errNoStatePartition = errors.New("kafka mode: no state partition")

// growStateTopic raises the state topic's partition count to n, so that
// every delay partition below n has its state partition. Partitions added
// to the delay topic while workers run reach them by a rebalance; the
// state topic has to follow, or their markers and snapshots have nowhere
// to go. Several workers may race to grow it: a count already at n or
// above is success.
func (w *Worker) growStateTopic(ctx context.Context, n int32) error {
	adm := w.ses.admin()
	td, err := adm.ListTopics(ctx, w.cfg.StateTopic)
	if err != nil {
		return fmt.Errorf("describe topic %s: %w", w.cfg.StateTopic, err)
	}
	if int32(len(td[w.cfg.StateTopic].Partitions)) >= n {
		return nil
	}
	rs, err := adm.UpdatePartitions(ctx, int(n), w.cfg.StateTopic)
	if err == nil {
		if r, ok := rs[w.cfg.StateTopic]; ok && r.Err != nil && !errors.Is(r.Err, kerr.InvalidPartitions) {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("grow topic %s to %d partitions: %w", w.cfg.StateTopic, n, err)
	}
	w.cfg.Logger.Info("state topic grown to match the delay topic", "topic", w.cfg.StateTopic, "partitions", n)
	return nil
}

// onAssigned fences the open transactions of workers that left the group
// (fenceDeparted), then loads the state of newly assigned partitions
// before the client fetches their committed offsets and starts consuming
// them (the client calls it first, after every rebalance), so no record
// of theirs is read without them.
func (w *Worker) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	w.ses.setMemberID(cl)
	// At every rebalance, whatever it assigns: a departed worker's open
	// transaction holds up every worker's forwards to the business
	// partitions it wrote to, and its state writes the load below.
	w.fenceDeparted(ctx)
	ps := assigned[w.cfg.DelayTopic]
	if len(ps) == 0 {
		return
	}
	var loaded map[int32]*loadedPart
	var ends kadm.ListedOffsets
	for {
		var err error
		loaded, err = w.loadState(ctx, ps)
		if err == nil {
			ends, err = w.ses.admin().ListEndOffsets(ctx, w.cfg.DelayTopic)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNoStatePartition) {
			if gerr := w.growStateTopic(ctx, slices.Max(ps)+1); gerr != nil {
				err = errors.Join(err, gerr)
			}
		}
		w.cfg.Logger.Warn("loading the partitions' state failed; retrying", "partitions", ps, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	nMarkers, nResolved, nSnap := 0, int64(0), 0
	pps := make([]*partProgress, 0, len(ps))
	for _, p := range ps {
		lp := loaded[p]
		catchUp := int64(0)
		if lo, ok := ends.Lookup(w.cfg.DelayTopic, p); ok && lo.Err == nil {
			catchUp = lo.Offset
		}
		pps = append(pps, takenOver(p, lp, catchUp))
		nMarkers += len(lp.markers)
		nResolved += lp.resolved.count()
		if lp.snap != nil {
			nSnap++
		}
	}
	w.parts.install(pps)
	w.stats.Assigned.Add(int64(len(ps)))
	w.cfg.Logger.Info("partitions assigned", "partitions", ps, "legacy_markers", nMarkers, "resolved_above_commit", nResolved,
		"snapshots", nSnap, "state_records_read", w.stats.StateRecordsRead.Load())
}

// adjustOffsets runs when the group has fetched the committed offsets of
// newly assigned partitions, before consuming them: a partition with a
// snapshot starts at the snapshot's read position (or at its committed
// offset if that is further), and its snapshot entries at or above the
// committed offset become its pending index. A partition without a
// committed offset ignores its snapshot (offsets expired: read from the
// start, as without one).
func (w *Worker) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	if o := offsets[w.cfg.DelayTopic]; o != nil {
		w.parts.applySeeds(o, w.cfg.Logger)
	}
	return offsets, nil
}

// onRevoked drops revoked or lost partitions; their entries die lazily.
// The session aborts a transaction that is in progress.
func (w *Worker) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ps := revoked[w.cfg.DelayTopic]
	w.parts.revoke(ps)
	w.stats.Revoked.Add(int64(len(ps)))
	w.cfg.Logger.Info("partitions revoked", "partitions", ps)
}
