package remoting

import (
	"strconv"
	"testing"
)

// TestOffsetsBounded: consumer offsets are kept for at most maxGroups
// groups and maxOffsets offsets: an update past either, for a new group
// or queue, gets INVALID_PARAMETER and is not kept; the groups and queues
// already kept are updated as before, and the bounds hold after a
// restart too.
func TestOffsetsBounded(t *testing.T) {
	dir := t.TempDir()
	b := startAt(t, dir, "127.0.0.1:0", nil)
	for q := 0; q < 4; q++ {
		send := &Command{Code: codeSendMessage, Body: []byte("x"), ExtFields: map[string]string{"topic": "orders", "queueId": strconv.Itoa(q)}}
		if resp := b.request(t, send); resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	st := b.srv.offsets
	st.mu.Lock()
	st.maxGroups, st.maxOffsets = 3, 5
	st.mu.Unlock()
	update := func(group string, q int) *Command {
		return b.request(t, &Command{Code: codeUpdateConsumerOffset, ExtFields: map[string]string{"consumerGroup": group,
			"topic": "orders", "queueId": strconv.Itoa(q), "commitOffset": "1"}})
	}
	for _, g := range []string{"g0", "g1", "g2"} {
		if resp := update(g, 0); resp.Code != respSuccess {
			t.Fatalf("update of %s: %d %q", g, resp.Code, resp.Remark)
		}
	}
	if resp := update("g3", 0); resp.Code != respInvalidParameter || resp.Remark == "" {
		t.Fatalf("a fourth group past a bound of 3: %d %q", resp.Code, resp.Remark)
	}
	if _, ok := st.get(offsetKey{"g3", "orders", 0}); ok {
		t.Fatal("a refused group's offset was kept")
	}
	for q := 1; q < 3; q++ {
		if resp := update("g0", q); resp.Code != respSuccess {
			t.Fatalf("a kept group's queue %d: %d %q", q, resp.Code, resp.Remark)
		}
	}
	if resp := update("g0", 3); resp.Code != respInvalidParameter {
		t.Fatalf("a sixth offset past a bound of 5: %d %q", resp.Code, resp.Remark)
	}
	if resp := update("g1", 0); resp.Code != respSuccess {
		t.Fatalf("an offset already kept: %d %q", resp.Code, resp.Remark)
	}
	// The broker's own offset (the transactions' low mark) is kept past
	// the clients' bounds.
	if _, err := st.set(offsetKey{txGroup, halfTopic, 0}, 1); err != nil {
		t.Fatalf("the transactions' offset past the bounds: %v", err)
	}
	b.close(t)
	b = startAt(t, dir, "127.0.0.1:0", nil)
	b.srv.offsets.mu.Lock()
	groups, n := len(b.srv.offsets.groups), len(b.srv.offsets.offsets)
	b.srv.offsets.maxGroups = 4
	b.srv.offsets.mu.Unlock()
	if groups != 4 || n != 6 {
		t.Fatalf("after a restart: %d groups, %d offsets; want 4, 6 (the transactions' one among them)", groups, n)
	}
	if resp := update("g4", 0); resp.Code != respInvalidParameter {
		t.Fatalf("after a restart, a fourth group: %d %q", resp.Code, resp.Remark)
	}
}
