package engine

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// eioOnSync makes the next n Syncs of files whose name contains part fail
// with EIO; vfs.Faulty then drops the pages they covered, as Linux does.
func eioOnSync(ff *vfs.Faulty, part string, n int) {
	var mu sync.Mutex
	ff.Inject(func(op vfs.Op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if op == vfs.OpSync && strings.Contains(name, part) && n > 0 {
			n--
			return syscall.EIO
		}
		return nil
	})
}

// TestFsyncFailureStops: two transient EIOs on a cache's fsync, then a
// power loss. The first failure stops the engine (no checkpoint vouches for
// pages the kernel may have dropped, however often it is retried), and
// after the power loss every acknowledged message is there, by ID and by
// key. The review reproduced 20 of 20 messages lost with a retrying
// checkpointer.
func TestFsyncFailureStops(t *testing.T) {
	for _, part := range []string{"timers", "queues", "keys", "overlay"} {
		t.Run(part, func(t *testing.T) {
			mem := vfs.NewMem()
			ff := vfs.NewFaulty(mem)
			h := newHarness(t, func(o *Options) { o.FS = ff })
			var sent []Receipt
			for i := 0; i < 20; i++ {
				key := fmt.Sprintf("order-%d", i)
				w := message.When{Delay: time.Hour + time.Duration(i)*time.Minute}
				if i%2 == 0 {
					w = message.When{} // visible now: a queue-index entry
				}
				sent = append(sent, h.send("t", key, w))
			}
			// A reschedule puts an entry in the overlay journal.
			if _, err := h.e.Reschedule(t.Context(), sent[1].ID, message.When{Delay: 3 * time.Hour}, 0); err != nil {
				t.Fatal(err)
			}
			sent[1].Due = h.e.Now() + 3*3600_000
			h.settle("t", 10)
			eioOnSync(ff, part, 2)
			for i := 0; i < 3; i++ {
				if err := h.e.checkpoint(); err == nil {
					t.Fatalf("checkpoint %d after a failed fsync of %s succeeded", i+1, part)
				}
			}
			select {
			case <-h.e.Failed():
			default:
				t.Fatalf("the engine did not stop after a failed fsync of %s", part)
			}
			_, err := h.e.Send(t.Context(), message.Message{Topic: "t", Body: []byte("late")}, message.When{})
			if errs.CodeOf(err) != errs.Unavailable {
				t.Fatalf("send after the failure: %v, want unavailable", err)
			}
			// Power loss, then a restart on what is durable.
			h.powerLossRestart(mem)
			for i, r := range sent {
				info, err := h.e.Inspect(r.ID)
				if err != nil {
					t.Fatalf("message %d lost: %v", i, err)
				}
				if i%2 == 1 && (info.State != StatePending || info.Due != r.Due) {
					t.Fatalf("message %d: %+v, want pending due %d", i, info, r.Due)
				}
				kinfo, err := h.e.InspectKey("t", fmt.Sprintf("order-%d", i))
				if err != nil || kinfo.ID != r.ID {
					t.Fatalf("key of message %d: %+v %v", i, kinfo, err)
				}
			}
			if vs := h.visible("t"); len(vs) != 10 {
				t.Fatalf("%d visible after recovery, want 10", len(vs))
			}
		})
	}
}

// TestLogFsyncFailureStops: a failed fsync of the commit log fails the
// sends it covered and stops the engine; nothing acknowledged is lost.
func TestLogFsyncFailureStops(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ff })
	ok := h.send("t", "a", message.When{Delay: time.Hour})
	eioOnSync(ff, "log", 1)
	if _, err := h.e.Send(t.Context(), message.Message{Topic: "t", Key: "b", Body: []byte("b")}, message.When{Delay: time.Hour}); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("send whose fsync failed: %v, want unavailable", err)
	}
	<-h.e.Failed()
	if _, err := h.e.Send(t.Context(), message.Message{Topic: "t", Body: []byte("c")}, message.When{}); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("send after the failure: %v, want unavailable", err)
	}
	h.powerLossRestart(mem)
	if info, err := h.e.Inspect(ok.ID); err != nil || info.State != StatePending {
		t.Fatalf("acknowledged message after the failure: %+v %v", info, err)
	}
}
