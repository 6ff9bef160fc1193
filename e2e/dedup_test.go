package e2e_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// dedupReceipt is a send's answer with its duplicate flag.
type dedupReceipt struct {
	receipt
	Duplicate bool `json:"duplicate"`
}

// TestDedupAcrossKill9: senders send messages with dedup IDs while the
// broker is killed with SIGKILL. After the restart every message is sent
// again, as a client that lost its answers would: an acknowledged one must
// come back as a duplicate with its first ID, and in the end each dedup ID
// has exactly one stored message.
func TestDedupAcrossKill9(t *testing.T) {
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/idem", nil, http.StatusCreated, nil)
	var mu sync.Mutex
	acked := map[string]string{} // dedup ID -> ID
	attempted := map[string]bool{}
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				mu.Lock()
				attempted[id] = true
				mu.Unlock()
				r, err := s.try("POST", "/v1/topics/idem/messages", map[string]any{"body": id, "delay": "1h", "dedup_id": id})
				if err != nil || r.status != http.StatusOK {
					return // the broker is gone: this one is in doubt
				}
				var rc dedupReceipt
				if jsonUnmarshal(r.body, &rc) != nil {
					return
				}
				mu.Lock()
				acked[id] = rc.ID
				mu.Unlock()
				n.Add(1)
			}
		}()
	}
	eventually(t, 30*time.Second, "300 acknowledged sends", func() bool { return n.Load() >= 300 })
	s.stop(syscall.SIGKILL)
	close(stop)
	wg.Wait()
	s.start()

	for id := range attempted {
		var rc dedupReceipt
		s.call("POST", "/v1/topics/idem/messages", map[string]any{"body": id, "delay": "1h", "dedup_id": id}, http.StatusOK, &rc)
		if first, ok := acked[id]; ok && (!rc.Duplicate || rc.ID != first) {
			t.Fatalf("resend of acknowledged %s after kill -9: %+v, first %s", id, rc, first)
		}
	}
	// A conflicting resend names the first message.
	for id, first := range acked {
		r := s.do("POST", "/v1/topics/idem/messages", map[string]any{"body": "other", "delay": "1h", "dedup_id": id})
		wantError(t, r, http.StatusConflict, "already_exists")
		var e struct {
			Error struct{ ID string } `json:"error"`
		}
		if jsonUnmarshal(r.body, &e) != nil || e.Error.ID != first {
			t.Fatalf("conflict body %s, want id %s", r.body, first)
		}
		break
	}
	var topic struct{ Pending int64 }
	s.call("GET", "/v1/topics/idem", nil, http.StatusOK, &topic)
	if topic.Pending != int64(len(attempted)) {
		t.Fatalf("%d messages stored for %d dedup IDs (%d acknowledged before the kill)", topic.Pending, len(attempted), len(acked))
	}
	t.Logf("%d dedup IDs, %d acknowledged before kill -9, one message each after resending all", len(attempted), len(acked))
}
