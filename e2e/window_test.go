package e2e_test

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestWindowedHerdAcrossKill9: a herd with a tolerance window is being
// spread over its window when the broker is killed with SIGKILL; after the
// restart every message arrives exactly once and none before its due time.
func TestWindowedHerdAcrossKill9(t *testing.T) {
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/herd", nil, http.StatusCreated, nil)
	s.call("PUT", "/v1/topics/herd/groups/g", nil, http.StatusCreated, nil)
	const n = 2000
	at := nowMs() + 1000
	for b := 0; b < n/500; b++ {
		msgs := make([]map[string]any, 500)
		for i := range msgs {
			msgs[i] = map[string]any{"body": fmt.Sprint(b*500 + i), "at": at, "window": 3000}
		}
		s.call("POST", "/v1/topics/herd/batch", map[string]any{"messages": msgs}, http.StatusOK, nil)
	}
	seen := map[string]bool{}
	take := func() {
		got := s.receive("herd", "g", map[string]any{"max": 1000, "wait": "1s"})
		for _, m := range got {
			if seen[*m.Body] {
				t.Fatalf("message %s delivered twice", *m.Body)
			}
			if m.Visible < at || m.Due < at || m.Due > at+3000 {
				t.Fatalf("message %s due %d visible %d; the window is [%d, %d]", *m.Body, m.Due, m.Visible, at, at+3000)
			}
			seen[*m.Body] = true
		}
		s.ack("herd", "g", got...)
	}
	// Receive until part of the herd arrived, then kill the broker mid-window.
	eventually(t, 10*time.Second, "a part of the herd", func() bool { take(); return len(seen) >= n/5 })
	if len(seen) == n {
		t.Fatalf("the whole herd arrived at once; it should be spread over its 3 s window")
	}
	s.stop(syscall.SIGKILL)
	s.start()
	// Every receive above was acked before the kill, durably: nothing
	// seen comes again, and the rest arrives once.
	eventually(t, 20*time.Second, "the whole herd", func() bool { take(); return len(seen) == n })
}
