package e2e_test

import (
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"
)

// lateBound is how late past its due time a message may reach a waiting
// consumer in these tests. The broker aims at milliseconds; the bound is
// loose because the tests run under -race on small shared machines.
const lateBound = 750 * time.Millisecond

// TestDelayedDeliveryOnTime: messages with delays from 300 ms to 1 s reach
// a long-polling consumer never before their due time and within
// lateBound after it.
func TestDelayedDeliveryOnTime(t *testing.T) {
	s := startServer(t, "", nil)
	const n = 20
	var msgs []map[string]any
	for i := 0; i < n; i++ {
		d := 300*time.Millisecond + time.Duration(i)*35*time.Millisecond
		msgs = append(msgs, map[string]any{"key": fmt.Sprint("k", i), "body": fmt.Sprint(i), "delay": d.String()})
	}
	sentAt := nowMs()
	var br struct{ Receipts []receipt }
	s.call("POST", "/v1/topics/timers/batch", map[string]any{"messages": msgs}, http.StatusOK, &br)
	if len(br.Receipts) != n {
		t.Fatalf("%d receipts for %d messages", len(br.Receipts), n)
	}
	due := map[string]int64{}
	for i, r := range br.Receipts {
		want := 300 + int64(i)*35
		if r.Due < sentAt+want || r.Due > nowMs()+want {
			t.Fatalf("message %d: due %d, want %d ms after the send (sent in [%d, %d])", i, r.Due, want, sentAt, nowMs())
		}
		due[r.ID] = r.Due
	}

	lateness := map[string]int64{}
	deadline := time.Now().Add(30 * time.Second)
	for len(lateness) < n && time.Now().Before(deadline) {
		got := s.receive("timers", "g", map[string]any{"wait": "2s", "max": 100})
		at := nowMs()
		for _, m := range got {
			d, ok := due[m.ID]
			if !ok {
				t.Fatalf("received unknown message %s", m.ID)
			}
			if _, dup := lateness[m.ID]; dup {
				t.Fatalf("message %s received twice", m.ID)
			}
			if at < d || m.Visible < d || m.Due != d {
				t.Fatalf("message %s due %d: received at %d, visible at %d (due in answer %d): early", m.ID, d, at, m.Visible, m.Due)
			}
			lateness[m.ID] = at - d
		}
		s.ack("timers", "g", got...)
	}
	if len(lateness) != n {
		t.Fatalf("received %d of %d messages", len(lateness), n)
	}
	var ls []int64
	for _, l := range lateness {
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	if max := time.Duration(ls[n-1]) * time.Millisecond; max > lateBound {
		t.Fatalf("latest message arrived %v after its due time (bound %v); lateness ms %v", max, lateBound, ls)
	}
	t.Logf("lateness at the consumer, ms: min %d, median %d, max %d", ls[0], ls[n/2], ls[n-1])
}

// TestCancelAndReschedule: a cancelled message never arrives; a
// rescheduled one arrives at its new time, not its old one; and a
// compare-and-set reschedule with a stale due time is refused.
func TestCancelAndReschedule(t *testing.T) {
	s := startServer(t, "", nil)
	var a, b receipt
	s.call("POST", "/v1/topics/orders/messages", map[string]any{"key": "order-a", "body": "a", "delay": "400ms"}, http.StatusOK, &a)
	s.call("POST", "/v1/topics/orders/messages", map[string]any{"key": "order-b", "body": "b", "delay": "400ms"}, http.StatusOK, &b)

	var c struct{ ID, State string }
	s.call("DELETE", "/v1/messages/"+a.ID, nil, http.StatusOK, &c)
	if c.ID != a.ID || c.State != "cancelled" {
		t.Fatalf("cancel answer %+v", c)
	}
	wantError(t, s.do("POST", "/v1/messages/"+b.ID+"/reschedule", map[string]any{"delay": "1s", "if_due": b.Due - 1}), http.StatusConflict, "failed_precondition")
	var rs struct {
		ID  string
		Due int64
	}
	s.call("POST", "/v1/messages/"+b.ID+"/reschedule", map[string]any{"delay": "1200ms", "if_due": b.Due}, http.StatusOK, &rs)
	if rs.Due < b.Due+700 {
		t.Fatalf("rescheduled due %d is not about 1.2s from now (old due %d)", rs.Due, b.Due)
	}
	var byKey info
	s.call("GET", "/v1/topics/orders/keys/order-b", nil, http.StatusOK, &byKey)
	if byKey.ID != b.ID || byKey.State != "pending" || byKey.Due != rs.Due {
		t.Fatalf("inspect by key: %+v", byKey)
	}

	var got []received
	deadline := time.Now().Add(20 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		got = s.receive("orders", "g", map[string]any{"wait": "2s"})
	}
	at := nowMs()
	if len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("received %+v, want only the rescheduled message %s", got, b.ID)
	}
	if at < rs.Due || got[0].Due != rs.Due {
		t.Fatalf("rescheduled message arrived at %d, before its new due time %d", at, rs.Due)
	}
	s.ack("orders", "g", got...)
	// The cancelled message was due long before b's new time: had it
	// fired, it would have been received first.
	if more := s.receive("orders", "g", nil); len(more) != 0 {
		t.Fatalf("after the rescheduled message, received %+v", more)
	}
	var ia info
	s.call("GET", "/v1/messages/"+a.ID, nil, http.StatusOK, &ia)
	if ia.State != "cancelled" {
		t.Fatalf("cancelled message is %s", ia.State)
	}
	wantError(t, s.do("DELETE", "/v1/messages/"+b.ID, nil), http.StatusConflict, "failed_precondition")
}
