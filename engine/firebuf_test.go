package engine

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/hourglass-mq/hourglass/message"
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
