package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMLosesNothingAcknowledged: many concurrent senders, SIGTERM
// while they send; after a restart every message answered 200 is there.
func TestSIGTERMLosesNothingAcknowledged(t *testing.T) {
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/load", nil, http.StatusCreated, nil)

	var mu sync.Mutex
	var ids []string
	var ok atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var got []string
				if i%2 == 0 {
					r, err := s.try("POST", "/v1/topics/load/messages", map[string]any{"body": fmt.Sprint(w, "-", i), "delay": "1h"})
					if err != nil || r.status != http.StatusOK {
						continue // refused or cut off during shutdown: not acknowledged
					}
					var rc receipt
					if jsonUnmarshal(r.body, &rc) != nil {
						continue
					}
					got = append(got, rc.ID)
				} else {
					batch := make([]map[string]any, 10)
					for j := range batch {
						batch[j] = map[string]any{"body": fmt.Sprint(w, "-", i, "-", j)}
					}
					r, err := s.try("POST", "/v1/topics/load/batch", map[string]any{"messages": batch})
					if err != nil || r.status != http.StatusOK {
						continue
					}
					var br struct{ Receipts []receipt }
					if jsonUnmarshal(r.body, &br) != nil {
						continue
					}
					for _, rc := range br.Receipts {
						got = append(got, rc.ID)
					}
				}
				mu.Lock()
				ids = append(ids, got...)
				mu.Unlock()
				ok.Add(int64(len(got)))
			}
		}()
	}
	eventually(t, 30*time.Second, "500 acknowledged sends", func() bool { return ok.Load() >= 500 })
	err := s.stop(syscall.SIGTERM)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v; output:\n%s", err, s.logs)
	}
	if !strings.Contains(s.logs.String(), "stopped") {
		t.Fatalf("no clean stop in the output:\n%s", s.logs)
	}
	s.start()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		var in info
		s.call("GET", "/v1/messages/"+id, nil, http.StatusOK, &in)
		if in.ID != id {
			t.Fatalf("inspect %s answered %+v", id, in)
		}
	}
	var topic struct{ Pending int64 }
	s.call("GET", "/v1/topics/load", nil, http.StatusOK, &topic)
	t.Logf("%d acknowledged messages all found after restart (topic pending %d)", len(ids), topic.Pending)
}

// TestRestartKeepsGroupProgress: after a restart (clean or kill -9) acked
// messages are not delivered again, unacked ones are, and messages that
// were in flight come back with their attempt count kept.
func TestRestartKeepsGroupProgress(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			s := startServer(t, "", nil)
			s.call("PUT", "/v1/topics/p", map[string]any{"queues": 2}, http.StatusCreated, nil)
			var msgs []map[string]any
			for i := 0; i < 50; i++ {
				msgs = append(msgs, map[string]any{"body": fmt.Sprint(i)})
			}
			var br struct{ Receipts []receipt }
			s.call("POST", "/v1/topics/p/batch", map[string]any{"messages": msgs}, http.StatusOK, &br)

			acked := map[string]bool{}
			var leased []received
			for len(acked) < 30 {
				got := s.receive("p", "g", map[string]any{"max": 30 - len(acked), "wait": "1s", "invisible": "10m"})
				s.ack("p", "g", got...)
				for _, m := range got {
					acked[m.ID] = true
				}
			}
			for len(leased) < 5 {
				leased = append(leased, s.receive("p", "g", map[string]any{"max": 5 - len(leased), "wait": "1s", "invisible": "10m"})...)
			}
			inFlight := map[string]bool{}
			for _, m := range leased {
				inFlight[m.ID] = true
			}

			s.restart(sig)

			seen := map[string]received{}
			deadline := time.Now().Add(20 * time.Second)
			for len(seen) < 20 && time.Now().Before(deadline) {
				got := s.receive("p", "g", map[string]any{"max": 100, "wait": "500ms"})
				for _, m := range got {
					if acked[m.ID] {
						t.Fatalf("acked message %s delivered again after restart", m.ID)
					}
					if _, dup := seen[m.ID]; dup {
						t.Fatalf("message %s delivered twice after restart", m.ID)
					}
					seen[m.ID] = m
				}
				s.ack("p", "g", got...)
			}
			if len(seen) != 20 {
				t.Fatalf("after restart received %d messages, want the 20 not acked", len(seen))
			}
			for id := range inFlight {
				m, ok := seen[id]
				if !ok {
					t.Fatalf("in-flight message %s not delivered after restart", id)
				}
				if m.Attempt < 2 {
					t.Fatalf("in-flight message %s redelivered with attempt %d, want at least 2", id, m.Attempt)
				}
			}
			if more := s.receive("p", "g", map[string]any{"wait": "300ms"}); len(more) != 0 {
				t.Fatalf("more messages after all were acked: %+v", more)
			}
		})
	}
}

// TestMetricsEndpoint: the real binary serves Prometheus metrics that
// follow the sends.
func TestMetricsEndpoint(t *testing.T) {
	s := startServer(t, "", nil)
	for i := 0; i < 3; i++ {
		s.call("POST", "/v1/topics/m/messages", map[string]any{"body": "x", "delay": "1h"}, http.StatusOK, nil)
	}
	r := s.do("GET", "/metrics", nil)
	if r.status != http.StatusOK {
		t.Fatalf("/metrics: %d", r.status)
	}
	for _, want := range []string{"hourglass_messages_sent_total 3", `hourglass_topic_messages_pending{topic="m"} 3`, "hourglass_lateness_seconds_bucket", "hourglass_fsync_seconds_count"} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
}
