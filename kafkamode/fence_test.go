package kafkamode

import (
	"slices"
	"testing"
)

// TestMemberClientIDRoundTrip: a worker's client ID gives back its
// transactional ID and nonce, whatever its WorkerID holds ('~' too), and
// client IDs no worker makes are not taken for one.
func TestMemberClientIDRoundTrip(t *testing.T) {
	nonce := newNonce()
	if len(nonce) != nonceLen || nonce == newNonce() {
		t.Fatalf("nonce %q: want %d hex digits, new each time", nonce, nonceLen)
	}
	for _, id := range []string{"hourglass-w1", "g-host~7-123", "g-a~0123456789abcdef"} {
		got, n, ok := parseMemberClientID(memberClientID(id, nonce))
		if !ok || got != id || n != nonce {
			t.Errorf("%q: parsed %q, %q, %v", id, got, n, ok)
		}
	}
	for _, cid := range []string{"kgo", "", "~0123456789abcdef", "g-w1~0123456789abcde", "g-w1~0123456789ABCDEF", "g-w1~0123456789abcdeg", "g-w1-0123456789abcdef"} {
		if id, n, ok := parseMemberClientID(cid); ok {
			t.Errorf("%q parsed as a worker's (%q, %q)", cid, id, n)
		}
	}
}

// TestRosterSwapNamesTheDeparted: the transactional IDs returned are those
// seen at the last rebalance and absent now, never the worker's own; the
// first look names none.
func TestRosterSwapNamesTheDeparted(t *testing.T) {
	var s session
	live := func(ids ...string) map[string][]string {
		m := map[string][]string{}
		for _, id := range ids {
			m[id] = []string{"n"}
		}
		return m
	}
	steps := []struct {
		live []string
		gone []string
	}{
		{[]string{"g-me", "g-a", "g-b"}, nil},
		{[]string{"g-me", "g-a", "g-b", "g-c"}, nil},
		{[]string{"g-a", "g-c"}, []string{"g-b"}}, // own ID absent (between sessions): never fenced
		{[]string{"g-a", "g-c"}, nil},             // forgotten once named
		{nil, []string{"g-a", "g-c"}},
		{[]string{"g-b"}, nil},
	}
	for i, st := range steps {
		if got := s.rosterSwap(live(st.live...), "g-me"); !slices.Equal(got, st.gone) {
			t.Errorf("step %d: gone %v, want %v", i, got, st.gone)
		}
	}
}
