package engine

import (
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/queueindex"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Between two checkpoints the queue indexes take every fired message's
// entry, about 30 B each: at 20,000 fires a second, 600 KiB a second that
// would otherwise sit dirty until the checkpoint's fsync writes them in one
// burst, ahead of the commit log's fdatasync that sends wait for. The
// checkpointer therefore starts their write-out every trickleEvery
// (queueindex.Index.StartWriteback), so the checkpoint's fsync has only the
// last fraction left. The trickle makes nothing durable; the checkpoint
// still syncs every index before it vouches for it.

// trickleEvery is how often the checkpointer starts the write-out of the
// queue indexes: a tenth of the checkpoint interval, between 50 and 500 ms.
func (k *checkpointer) trickleEvery() time.Duration {
	return min(max(k.opts.CheckpointInterval/10, 50*time.Millisecond), 500*time.Millisecond)
}

// trickleTicks returns the channel the checkpointer trickles on and the
// function that stops it. The ticks are real time, not the engine's clock:
// they pace disk I/O, which happens in real time whatever the broker's
// clock says (a test's fake clock then also sees no extra timer). Only
// vfs.OS has a write-out to start; on any other filesystem the channel is
// nil and never ticks.
func (k *checkpointer) trickleTicks() (<-chan time.Time, func()) {
	if k.opts.FS != vfs.OS {
		return nil, func() {}
	}
	tk := time.NewTicker(k.trickleEvery())
	return tk.C, tk.Stop
}

// waitCheckpoint waits until the next checkpoint is due (the timer t fires
// or one is asked for), starting the queue indexes' write-out at every
// tick of trickle meanwhile. It returns false when the engine is closing
// or has failed: no checkpoint then.
func (k *checkpointer) waitCheckpoint(t clock.Timer, trickle <-chan time.Time) bool {
	defer t.Stop()
	for {
		select {
		case <-k.life.stopping():
			return false
		case <-k.life.failedSignal():
			// No checkpoint after a fatal failure (fail.go).
			return false
		case <-t.C():
			return true
		case <-k.life.checkpointAsked():
			return true
		case <-trickle:
			k.trickleQueues()
		}
	}
}

// trickleQueues starts the write-out of every queue index's new entries,
// outside the engine's lock. A failed write-out is only logged: the
// checkpoint's Sync of the same index reports it and stops the engine.
func (k *checkpointer) trickleQueues() {
	k.mu.Lock()
	var qs []*queueindex.Index
	for t := range k.cat.topicsLocked() {
		qs = append(qs, t.queues...)
	}
	k.mu.Unlock()
	for _, q := range qs {
		if err := q.StartWriteback(); err != nil {
			k.opts.Logger.Warn("starting a queue index's write-out failed", "err", err)
		}
	}
}
