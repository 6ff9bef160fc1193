package e2e_test

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestRedriveOnlyToItsGroup is the case on the real binary: topic
// orders with groups billing, audit and workers. Redriving billing's 20
// dead letters gives billing the 20 again and audit and workers nothing,
// whose counts stay as they were, also after a kill -9 and a restart. The
// broker used to republish them to the whole topic: audit and workers
// received the 20 again.
func TestRedriveOnlyToItsGroup(t *testing.T) {
	const n = 20
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/orders", map[string]any{"queues": 2}, http.StatusCreated, nil)
	for _, g := range []string{"billing", "audit", "workers"} {
		cfg := map[string]any{}
		if g == "billing" {
			cfg["max_attempts"] = 1
		}
		s.call("PUT", "/v1/topics/orders/groups/"+g, cfg, http.StatusCreated, nil)
	}
	var msgs []map[string]any
	for i := range n {
		msgs = append(msgs, map[string]any{"body": fmt.Sprint("order ", i)})
	}
	s.call("POST", "/v1/topics/orders/batch", map[string]any{"messages": msgs}, http.StatusOK, nil)
	take := func(g string, want int) []received {
		t.Helper()
		var got []received
		eventually(t, 10*time.Second, fmt.Sprintf("%d for %s", want, g), func() bool {
			got = append(got, s.receive("orders", g, map[string]any{"max": 100, "wait": "1s", "invisible": "5m"})...)
			return len(got) >= want
		})
		if len(got) != want {
			t.Fatalf("%s received %d, want %d", g, len(got), want)
		}
		return got
	}
	for _, g := range []string{"audit", "workers"} {
		s.ack("orders", g, take(g, n)...)
	}
	for _, m := range take("billing", n) {
		s.call("POST", "/v1/topics/orders/groups/billing/nack", map[string]any{"receipt": m.Receipt}, http.StatusOK, nil)
	}
	groups := func() map[string]groupInfo {
		var gl struct{ Groups []groupInfo }
		s.call("GET", "/v1/topics/orders/groups", nil, http.StatusOK, &gl)
		out := map[string]groupInfo{}
		for _, g := range gl.Groups {
			out[g.Name] = g
		}
		return out
	}
	eventually(t, 10*time.Second, "dead-lettering", func() bool { return groups()["billing"].DeadLettered == n })
	// A redrive moves the dead letters visible in their topic so far.
	redriven := 0
	eventually(t, 10*time.Second, "redrive", func() bool {
		var rd struct{ Redriven int }
		s.call("POST", "/v1/topics/orders/groups/billing/redrive", map[string]any{"max": 100}, http.StatusOK, &rd)
		redriven += rd.Redriven
		return redriven >= n
	})
	if redriven != n {
		t.Fatalf("redriven %d, want %d", redriven, n)
	}
	// Once billing has all of them back, they are visible: a group that
	// could receive them would now.
	back := take("billing", n)
	for _, kill := range []bool{false, true} {
		for _, g := range []string{"audit", "workers"} {
			if got := s.receive("orders", g, map[string]any{"max": 100}); len(got) != 0 {
				t.Fatalf("%s received %d redriven messages (after a kill: %v)", g, len(got), kill)
			}
			if gi := groups()[g]; gi.Backlog != 0 || gi.InFlight != 0 {
				t.Fatalf("%s after the redrive: %+v", g, gi)
			}
		}
		if kill {
			break
		}
		s.restart(syscall.SIGKILL)
		// Not acked before the kill: billing, and only billing, gets them again.
		back = take("billing", n)
	}
	s.ack("orders", "billing", back...)
	if gi := groups()["billing"]; gi.Backlog != 0 {
		t.Fatalf("billing after acking the redriven: %+v", gi)
	}
}
