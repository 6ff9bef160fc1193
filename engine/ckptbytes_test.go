package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// ckptBytesRun opens an engine on mem whose interval never fires, sends n
// far-future messages of 512 B one at a time, and returns it.
func ckptBytesRun(t *testing.T, mem *vfs.Mem, limit int64, n int) (*Engine, Options) {
	t.Helper()
	opts := Options{Dir: "data", FS: mem, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Flush: FlushSync,
		CheckpointInterval: 1000 * time.Hour, CheckpointBytes: limit}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 512)
	for i := 0; i < n; i++ {
		m := message.Message{Topic: "t", Body: body}
		if _, err := e.Send(context.Background(), m, message.When{At: e.Now() + time.Hour.Milliseconds()}); err != nil {
			t.Fatal(err)
		}
	}
	return e, opts
}

// reopenImage opens the synced state of mem, as a power loss leaves it, and
// returns the log bytes its recovery replayed and the messages pending.
func reopenImage(t *testing.T, img *vfs.Mem, opts Options) (replayed uint64, pending int64) {
	t.Helper()
	opts.FS = img
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.Stats().ReplayedBytes.Load(), e.Stats().Pending.Load()
}

// TestCheckpointBytesBoundsReplay: with the interval out of the way, the log
// written alone triggers checkpoints, so that once the sends stop and the
// checkpoints asked for have run, a crash replays less than CheckpointBytes,
// and every acknowledged message is still pending.
func TestCheckpointBytesBoundsReplay(t *testing.T) {
	const limit, n = 32 << 10, 2000 // about 1.1 MiB of log: 35 limits
	mem := vfs.NewMem()
	e, opts := ckptBytesRun(t, mem, limit, n)
	defer e.Close()
	deadline := time.Now().Add(30 * time.Second)
	for e.ckpt.sinceCheckpoint() >= limit {
		if time.Now().After(deadline) {
			t.Fatalf("%d B of log since the last checkpoint 30 s after the sends; want < %d", e.ckpt.sinceCheckpoint(), limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Holding serial, no checkpoint is between its capture and its file:
	// the checkpoint on disk is the one of the last capture.
	e.gate.serial.Lock()
	since := e.ckpt.sinceCheckpoint()
	img := mem.Crash(nil)
	e.gate.serial.Unlock()
	if got := e.Stats().Checkpoints.Load(); got < 2 {
		t.Errorf("%d checkpoints for 35 times CheckpointBytes of log; want several", got)
	}
	replayed, pending := reopenImage(t, img, opts)
	if replayed > uint64(since) || replayed >= limit {
		t.Errorf("recovery replayed %d B; want at most the %d B synced since the last capture, under %d", replayed, since, limit)
	}
	if pending != n {
		t.Errorf("%d pending after the crash; want %d", pending, n)
	}
}

// TestCheckpointBytesOff: a negative CheckpointBytes leaves only the
// interval, so the same sends ask for no checkpoint and a crash replays
// every one of them.
func TestCheckpointBytesOff(t *testing.T) {
	const n = 2000
	mem := vfs.NewMem()
	e, opts := ckptBytesRun(t, mem, -1, n)
	defer e.Close()
	// The hook runs before a send's acknowledgement: an ask would be in
	// the channel by now.
	select {
	case <-e.life.checkpointAsked():
		t.Fatal("a checkpoint was asked for with CheckpointBytes negative")
	default:
	}
	img := mem.Crash(nil)
	if got := e.Stats().Checkpoints.Load(); got != 0 {
		t.Errorf("%d checkpoints with CheckpointBytes negative and a 1000 h interval; want 0", got)
	}
	replayed, pending := reopenImage(t, img, opts)
	if replayed < n*512 {
		t.Errorf("recovery replayed %d B; want every send's record, over %d B", replayed, n*512)
	}
	if pending != n {
		t.Errorf("%d pending after the crash; want %d", pending, n)
	}
}
