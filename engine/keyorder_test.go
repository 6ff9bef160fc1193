package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// TestKeyFollowsLogOrder sends one key from 40 goroutines at once, round
// after round: the key must name the message latest in the log, live, after
// a clean restart and after a crash, whatever order the senders applied in.
func TestKeyFollowsLogOrder(t *testing.T) {
	h := newHarness(t, nil)
	for round := 0; round < 5; round++ {
		var (
			mu     sync.Mutex
			latest message.ID
			wg     sync.WaitGroup
		)
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := h.e.Send(t.Context(), message.Message{Topic: "t", Key: "order-1", Body: []byte("x")}, message.When{Delay: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if r.ID.Pos > latest.Pos {
					latest = r.ID
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		check := func(when string) {
			t.Helper()
			id, err := h.e.LookupKey("t", "order-1")
			if err != nil || id != latest {
				t.Fatalf("round %d %s: key names %v (%v), the latest in the log is %v", round, when, id, err, latest)
			}
		}
		check("live")
		h.restart()
		check("after a restart")
	}
}
