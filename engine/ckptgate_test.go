package engine

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
)

// TestCheckpointUnderSendsMatchesTheLog: a checkpoint releases the gate as
// soon as it has read the log position and captures the rest under mu only,
// while senders append. After a power loss right after each checkpoint, the
// recovered engine must count every message in the log exactly once
// (a record applied before the capture and replayed after it would count
// twice) and hold every acknowledged message as pending.
func TestCheckpointUnderSendsMatchesTheLog(t *testing.T) {
	h := newHarness(t, nil)
	var mu sync.Mutex
	var acked []message.ID
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := h.e.Send(context.Background(), message.Message{Topic: "t", Body: []byte("x")}, message.When{Delay: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				sent.Add(1)
				mu.Lock()
				acked = append(acked, r.ID)
				mu.Unlock()
				time.Sleep(200 * time.Microsecond) // pacing: a few thousand messages per round, not a million
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for round := 0; round < 10; round++ {
		for n := sent.Load(); sent.Load() < n+50; {
			time.Sleep(100 * time.Microsecond)
		}
		if err := h.e.checkpoint(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		before := append([]message.ID(nil), acked...)
		mu.Unlock()
		img := h.fs.Crash(nil)
		o := h.opt
		o.FS = img
		e, err := Open(o)
		if err != nil {
			t.Fatalf("round %d: open the crash image: %v", round, err)
		}
		// Messages by identity: a moved message (compaction) is its
		// original position, whether or not its first copy is still there.
		ids := map[uint64]bool{}
		err = e.clog.Scan(e.clog.Start(), func(pos commitlog.Pos, rec commitlog.Record) error {
			switch rec.Type {
			case recMessage:
				ids[uint64(pos)] = true
			case recMoved:
				ids[binary.LittleEndian.Uint64(rec.Payload)] = true
			}
			return nil
		})
		records := int64(len(ids))
		if err != nil {
			t.Fatal(err)
		}
		if p := e.Stats().Pending.Load(); p != records {
			t.Errorf("round %d: %d pending after recovery, %d message records in the log", round, p, records)
		}
		for _, id := range before {
			if info, err := e.Inspect(id); err != nil || info.State != StatePending {
				t.Fatalf("round %d: acknowledged message %v is %v after recovery (%v)", round, id, info.State, err)
			}
		}
		e.Close()
	}
}
