package e2e_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestLeaseExpiryRedelivery: an unacked message comes back after its lease
// and the group's backoff, never before, with its attempt count raised.
func TestLeaseExpiryRedelivery(t *testing.T) {
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/jobs", nil, http.StatusCreated, nil)
	s.call("PUT", "/v1/topics/jobs/groups/w", map[string]any{"backoff_base": "200ms", "backoff_max": "1s"}, http.StatusCreated, nil)
	var r receipt
	s.call("POST", "/v1/topics/jobs/messages", map[string]any{"body": "work"}, http.StatusOK, &r)

	var first []received
	var leasedAfter int64
	eventually(t, 10*time.Second, "first delivery", func() bool {
		leasedAfter = nowMs()
		first = s.receive("jobs", "w", map[string]any{"invisible": "300ms", "wait": "1s"})
		return len(first) > 0
	})
	if first[0].ID != r.ID || first[0].Attempt != 1 {
		t.Fatalf("first delivery %+v", first[0])
	}
	var again []received
	deadline := time.Now().Add(20 * time.Second)
	for len(again) == 0 && time.Now().Before(deadline) {
		again = s.receive("jobs", "w", map[string]any{"wait": "2s"})
	}
	at := nowMs()
	if len(again) != 1 || again[0].ID != r.ID || again[0].Attempt != 2 || again[0].Receipt == first[0].Receipt {
		t.Fatalf("redelivery %+v", again)
	}
	// Lease (300 ms) plus backoff (200 ms) from a lease that began after leasedAfter.
	if at-leasedAfter < 500 {
		t.Fatalf("redelivered %d ms after the lease began; lease plus backoff is 500 ms", at-leasedAfter)
	}
	// The first receipt is dead: acking it fails and acks nothing.
	wantError(t, s.do("POST", "/v1/topics/jobs/groups/w/ack", map[string]any{"receipts": []string{first[0].Receipt}}), http.StatusNotFound, "not_found")
	s.ack("jobs", "w", again...)
	var gl struct{ Groups []groupInfo }
	s.call("GET", "/v1/topics/jobs/groups", nil, http.StatusOK, &gl)
	if g := gl.Groups[0]; g.Delivered != 2 || g.Redelivered != 1 || g.Acked != 1 || g.InFlight != 0 || g.Backlog != 0 {
		t.Fatalf("group after redelivery and ack: %+v", g)
	}
}

// TestDeadLetterAndRedrive: after max_attempts failed deliveries a message
// moves to the group's dead-letter topic, and redrive brings it back.
func TestDeadLetterAndRedrive(t *testing.T) {
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/pay", nil, http.StatusCreated, nil)
	s.call("PUT", "/v1/topics/pay/groups/w", map[string]any{"max_attempts": 3, "backoff_base": "50ms"}, http.StatusCreated, nil)
	var r receipt
	s.call("POST", "/v1/topics/pay/messages", map[string]any{"body": "poison", "key": "p1"}, http.StatusOK, &r)
	for attempt := 1; attempt <= 3; attempt++ {
		var got []received
		eventually(t, 10*time.Second, fmt.Sprint("delivery ", attempt), func() bool {
			got = s.receive("pay", "w", map[string]any{"wait": "1s"})
			return len(got) > 0
		})
		if got[0].ID != r.ID || got[0].Attempt != attempt {
			t.Fatalf("delivery %d: %+v", attempt, got[0])
		}
		s.call("POST", "/v1/topics/pay/groups/w/nack", map[string]any{"receipt": got[0].Receipt}, http.StatusOK, nil)
	}
	var g groupInfo
	eventually(t, 10*time.Second, "dead-lettering", func() bool {
		var gl struct{ Groups []groupInfo }
		s.call("GET", "/v1/topics/pay/groups", nil, http.StatusOK, &gl)
		g = gl.Groups[0]
		return g.DeadLettered == 1
	})
	if g.DeadLetterTopic == "" || g.Backlog != 0 {
		t.Fatalf("group after dead-lettering: %+v", g)
	}
	if more := s.receive("pay", "w", map[string]any{"wait": "300ms"}); len(more) != 0 {
		t.Fatalf("dead-lettered message delivered again: %+v", more)
	}
	// The dead letter is a message of the dead-letter topic ('%' escaped in the path).
	var dl struct {
		Name    string
		Visible uint64
	}
	s.call("GET", "/v1/topics/"+pathEscape(g.DeadLetterTopic), nil, http.StatusOK, &dl)
	if dl.Name != g.DeadLetterTopic || dl.Visible != 1 {
		t.Fatalf("dead-letter topic %+v", dl)
	}

	var rd struct{ Redriven int }
	s.call("POST", "/v1/topics/pay/groups/w/redrive", map[string]any{"max": 10}, http.StatusOK, &rd)
	if rd.Redriven != 1 {
		t.Fatalf("redriven %d, want 1", rd.Redriven)
	}
	var back []received
	eventually(t, 10*time.Second, "redriven delivery", func() bool {
		back = s.receive("pay", "w", map[string]any{"wait": "1s"})
		return len(back) > 0
	})
	if back[0].Attempt != 1 || back[0].Body == nil || *back[0].Body != "poison" || back[0].Key != "p1" || back[0].Properties["hourglass-redriven-from"] == "" {
		t.Fatalf("redriven message %+v", back[0])
	}
	s.ack("pay", "w", back...)
	s.call("POST", "/v1/topics/pay/groups/w/redrive", nil, http.StatusOK, &rd)
	if rd.Redriven != 0 {
		t.Fatalf("second redrive moved %d, want 0", rd.Redriven)
	}
}

// TestFIFOOrderWithinGroup: concurrent consumers of a FIFO topic see each
// message group's messages strictly in send order.
func TestFIFOOrderWithinGroup(t *testing.T) {
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/fifo", map[string]any{"fifo": true, "queues": 2}, http.StatusCreated, nil)
	const groups, per = 4, 15
	var msgs []map[string]any
	for i := 0; i < per; i++ {
		for g := 0; g < groups; g++ {
			msgs = append(msgs, map[string]any{"group": fmt.Sprint("order-", g), "body": fmt.Sprint(i)})
		}
	}
	s.call("POST", "/v1/topics/fifo/batch", map[string]any{"messages": msgs}, http.StatusOK, nil)

	var mu sync.Mutex
	seen := map[string][]string{} // message group -> bodies in receive order
	total := 0
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				done := total == groups*per
				mu.Unlock()
				if done {
					return
				}
				r, err := s.try("POST", "/v1/topics/fifo/groups/c/receive", `{"wait":"200ms","max":10}`)
				if err != nil || r.status != http.StatusOK {
					errc <- fmt.Errorf("receive: %v %d %s", err, r.status, r.body)
					return
				}
				var out struct{ Messages []received }
				if err := jsonUnmarshal(r.body, &out); err != nil {
					errc <- err
					return
				}
				var rs []string
				mu.Lock()
				for _, m := range out.Messages {
					seen[m.Group] = append(seen[m.Group], *m.Body)
					total++
					rs = append(rs, m.Receipt)
				}
				mu.Unlock()
				if len(rs) > 0 {
					if a, err := s.try("POST", "/v1/topics/fifo/groups/c/ack", map[string]any{"receipts": rs}); err != nil || a.status != http.StatusOK {
						errc <- fmt.Errorf("ack: %v %d %s", err, a.status, a.body)
						return
					}
				}
			}
			errc <- fmt.Errorf("consumers did not finish within 30s")
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for g := 0; g < groups; g++ {
		got := seen[fmt.Sprint("order-", g)]
		if len(got) != per {
			t.Fatalf("group %d: received %d messages, want %d: %v", g, len(got), per, got)
		}
		for i, b := range got {
			if b != fmt.Sprint(i) {
				t.Fatalf("group %d out of order: %v", g, got)
			}
		}
	}
}
