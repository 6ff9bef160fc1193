package e2e_test

import (
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"
)

// deadIDs lists a group's dead letters through the API, every page.
func (s *server) deadIDs(t *testing.T, topic, group string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for {
		var p struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		path := "/v1/topics/" + topic + "/groups/" + group + "/dead?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		s.call("GET", path, nil, http.StatusOK, &p)
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if p.NextCursor == nil {
			return ids
		}
		cursor = *p.NextCursor
	}
}

// TestDeadLetterActionsSurviveKill9 on the real binary: of billing's 6
// dead letters, 2 are resent and 1 deleted; after a kill -9 the listing
// shows the same 3, billing (and only billing) gets the 2 resent, and a
// purge holds across another kill -9.
func TestDeadLetterActionsSurviveKill9(t *testing.T) {
	const n = 6
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/pay", map[string]any{"queues": 2}, http.StatusCreated, nil)
	s.call("PUT", "/v1/topics/pay/groups/billing", map[string]any{"max_attempts": 1}, http.StatusCreated, nil)
	s.call("PUT", "/v1/topics/pay/groups/audit", map[string]any{}, http.StatusCreated, nil)
	var msgs []map[string]any
	for i := range n {
		msgs = append(msgs, map[string]any{"body": fmt.Sprint("pay ", i), "key": fmt.Sprint("pay-", i)})
	}
	s.call("POST", "/v1/topics/pay/batch", map[string]any{"messages": msgs}, http.StatusOK, nil)
	var got []received
	eventually(t, 10*time.Second, "billing's deliveries", func() bool {
		got = append(got, s.receive("pay", "billing", map[string]any{"max": 100, "wait": "1s"})...)
		return len(got) >= n
	})
	for _, m := range got {
		s.call("POST", "/v1/topics/pay/groups/billing/nack", map[string]any{"receipt": m.Receipt}, http.StatusOK, nil)
	}
	var dead []string
	eventually(t, 10*time.Second, "the dead letters listed", func() bool {
		dead = s.deadIDs(t, "pay", "billing")
		return len(dead) == n
	})
	var res struct {
		Action string `json:"action"`
		Count  int    `json:"count"`
	}
	s.call("POST", "/v1/topics/pay/groups/billing/dead/resend", map[string]any{"ids": dead[:2]}, http.StatusOK, &res)
	if res.Count != 2 {
		t.Fatalf("resend: %+v", res)
	}
	s.call("POST", "/v1/topics/pay/groups/billing/dead/delete", map[string]any{"ids": dead[2:3]}, http.StatusOK, &res)
	if res.Count != 1 {
		t.Fatalf("delete: %+v", res)
	}
	s.restart(syscall.SIGKILL)
	if left := s.deadIDs(t, "pay", "billing"); !slices.Equal(left, dead[3:]) {
		t.Fatalf("after kill -9 the dead letters are %v, want %v", left, dead[3:])
	}
	var back []received
	eventually(t, 10*time.Second, "the 2 resent at billing", func() bool {
		back = append(back, s.receive("pay", "billing", map[string]any{"max": 100, "wait": "1s"})...)
		return len(back) >= 2
	})
	from := []string{back[0].Properties["hourglass-redriven-from"], back[1].Properties["hourglass-redriven-from"]}
	slices.Sort(from)
	want := slices.Clone(dead[:2])
	slices.Sort(want)
	if len(back) != 2 || !slices.Equal(from, want) {
		t.Fatalf("billing got %d back, redriven from %v; want %v", len(back), from, want)
	}
	// The copies are visible (billing has them), and audit's backlog is its
	// own 6 only: no resent copy counts for it, or reaches it.
	var gl struct{ Groups []groupInfo }
	s.call("GET", "/v1/topics/pay/groups", nil, http.StatusOK, &gl)
	for _, g := range gl.Groups {
		if g.Name == "audit" && g.Backlog != n {
			t.Fatalf("audit's backlog is %d, want its own %d", g.Backlog, n)
		}
	}
	var audit []received
	eventually(t, 10*time.Second, "audit's own", func() bool {
		audit = append(audit, s.receive("pay", "audit", map[string]any{"max": 100, "wait": "1s"})...)
		return len(audit) >= n
	})
	for _, m := range audit {
		if m.Properties["hourglass-redriven-from"] != "" {
			t.Fatalf("audit received a resent copy: %+v", m)
		}
	}
	s.call("POST", "/v1/topics/pay/groups/billing/dead/purge", nil, http.StatusOK, &res)
	if res.Count != 3 {
		t.Fatalf("purge: %+v", res)
	}
	s.restart(syscall.SIGKILL)
	if left := s.deadIDs(t, "pay", "billing"); len(left) != 0 {
		t.Fatalf("after the purge and a kill -9: %v", left)
	}
}
