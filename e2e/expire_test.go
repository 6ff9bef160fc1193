package e2e_test

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestExpiryAcrossKill9: messages with a deadline are sent, the broker is
// killed with SIGKILL and stays down past the deadline; after the restart
// the consumer group never sees them, and each is in the group's
// dead-letter topic with reason expired. A message without a deadline sent
// with them is delivered.
func TestExpiryAcrossKill9(t *testing.T) {
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/offers", nil, http.StatusCreated, nil)
	s.call("PUT", "/v1/topics/offers/groups/g", nil, http.StatusCreated, nil)
	deadline := nowMs() + 1500
	var msgs []map[string]any
	for i := 0; i < 20; i++ {
		msgs = append(msgs, map[string]any{"body": fmt.Sprint("offer-", i), "delay": "500ms", "deadline": deadline})
	}
	msgs = append(msgs, map[string]any{"body": "keep", "delay": "500ms"})
	s.call("POST", "/v1/topics/offers/batch", map[string]any{"messages": msgs}, http.StatusOK, nil)
	s.stop(syscall.SIGKILL)
	// Down past the deadline: wait for the wall clock, not for an event
	// of the broker (it is not running).
	for nowMs() <= deadline+100 {
		time.Sleep(50 * time.Millisecond)
	}
	s.start()
	got := s.receive("offers", "g", map[string]any{"max": 100, "wait": "5s"})
	if len(got) != 1 || got[0].Body == nil || *got[0].Body != "keep" {
		t.Fatalf("received %d messages after the restart, want only the one without a deadline: %+v", len(got), got)
	}
	s.ack("offers", "g", got...)
	dead := map[string]bool{}
	eventually(t, 20*time.Second, "20 expired dead letters", func() bool {
		for _, m := range s.receive("%25DLQ%25offers.g", "ops", map[string]any{"max": 100, "wait": "1s"}) {
			if m.Properties["hourglass-dead-reason"] != "expired" {
				t.Fatalf("dead letter without reason expired: %+v", m.Properties)
			}
			dead[*m.Body] = true
		}
		return len(dead) == 20
	})
}
