package engine

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestFiresReuseOneBuffer: fires one after another take their batch from
// the same buffer once the fire before has been applied, instead of
// making one sized for the whole staged heap each time (a steady stream
// of small fires allocated that much per fire), and the messages still
// come out whole and in due order.
func TestFiresReuseOneBuffer(t *testing.T) {
	h := newHarness(t, nil)
	const n = 8
	for i := 1; i <= n; i++ {
		h.send("t", fmt.Sprint("k", i), message.When{Delay: time.Duration(i) * time.Second})
	}
	var first *fireEntry
	for i := 1; i <= n; i++ {
		h.clk.Advance(time.Second)
		vs := h.waitVisible("t", i)
		if len(vs) != i {
			t.Fatalf("after %d s, %d messages visible; want %d", i, len(vs), i)
		}
		for _, v := range vs {
			if v.Due > h.clk.Now().UnixMilli() || v.Due != v.Message.Due {
				t.Fatalf("after %d s, a message due at %d is visible (stored due %d)", i, v.Due, v.Message.Due)
			}
		}
		h.e.disp.fires.Wait() // the fire has given its buffer back
		h.e.mu.Lock()
		spare := h.e.disp.spare
		h.e.mu.Unlock()
		if cap(spare) == 0 {
			t.Fatalf("after fire %d the dispatcher holds no buffer", i)
		}
		p := unsafe.SliceData(spare)
		if first == nil {
			first = p
		} else if p != first {
			t.Fatalf("fire %d used a new buffer", i)
		}
	}
}

// TestFailedFireGivesItsBufferBack: a fire whose record cannot be written
// puts its messages back and gives its buffer back too, so the retry after
// the pause takes the same buffer, and every message still becomes
// visible once the disk has room again.
func TestFailedFireGivesItsBufferBack(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ffs })
	e := h.e
	sendHerd(t, e, "t", 10, e.Now()+1000)
	waitParked(e, h.clk)
	ffs.SetLimit(ffs.Used())
	h.clk.Advance(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for e.Stats().FireErrors.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	e.disp.fires.Wait()
	e.mu.Lock()
	failed, inflight := unsafe.SliceData(e.disp.spare), len(e.disp.inflight)
	e.mu.Unlock()
	if e.Stats().FireErrors.Load() < 1 || failed == nil || inflight != 0 {
		t.Fatalf("after %d failed fires the dispatcher holds buffer %p, %d in flight; want the failed fire's buffer back",
			e.Stats().FireErrors.Load(), failed, inflight)
	}
	ffs.SetLimit(-1)
	h.clk.Advance(time.Second)
	if n := waitVisible(h, "t", 10); n != 10 {
		t.Fatalf("%d of 10 visible after space came back", n)
	}
	e.disp.fires.Wait()
	e.mu.Lock()
	after := unsafe.SliceData(e.disp.spare)
	e.mu.Unlock()
	if after != failed {
		t.Fatal("the fire after the failure used a new buffer")
	}
}
