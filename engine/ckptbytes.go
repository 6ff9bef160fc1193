package engine

// A checkpoint bounds what recovery replays after a crash: the log written
// since it. CheckpointInterval bounds that span in time and the timer
// index's memtable (timerstore.FlushThreshold) in timers, but neither in
// bytes: at 300,000 sends a second, 5 s of log is 1.5 M records, and at
// 4 KiB a message 350,000 timers are 1.4 GB to read cold. So the
// checkpointer also counts the bytes the commit log syncs and asks for a
// checkpoint once CheckpointBytes were written since the last capture. The
// replay after a crash is then at most CheckpointBytes plus what was
// written while one checkpoint ran (the next is asked for at once if that
// was CheckpointBytes again), whatever the rate. The count is taken from
// the log's own sync hook, so nothing is added to an append's path but an
// atomic add on the writer goroutine once per group commit.

// logSynced is the commit log's OnSync hook: it counts the bytes one
// fdatasync made durable and asks for a checkpoint, once, when
// CheckpointBytes or more were synced since the last capture. It runs on
// the log's writer goroutine, so it only adds and signals.
func (k *checkpointer) logSynced(bytes int) {
	n := k.synced.Add(int64(bytes))
	limit := k.opts.CheckpointBytes
	if limit <= 0 || n-k.mark.Load() < limit || k.asked.Swap(true) {
		return
	}
	k.life.askCheckpoint()
}

// markCaptured starts a new count at a checkpoint's capture; the caller
// holds gate exclusively, so no append is between reading the log's head
// and this. Bytes appended before the capture but synced after it count
// towards the next checkpoint: the count errs towards checkpointing early.
func (k *checkpointer) markCaptured() {
	k.mark.Store(k.synced.Load())
	k.asked.Store(false)
}

// sinceCheckpoint returns the log bytes synced since the last capture: what
// recovery would replay after a crash now, give or take one group commit.
func (k *checkpointer) sinceCheckpoint() int64 {
	return k.synced.Load() - k.mark.Load()
}

// DefaultCheckpointBytes is the default of Options.CheckpointBytes: about
// 200,000 records of small messages (85 B each with a key and a 16 B body).
const DefaultCheckpointBytes = 16 << 20
