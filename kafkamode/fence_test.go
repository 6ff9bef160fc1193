package kafkamode

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestWorkerMembersOnlyThisGroupsWorkers: a member's client ID names a
// transactional ID a worker may fence once that member leaves; only the
// transactional IDs of this group's workers (group + "-" + worker ID)
// count, so that a client that joins the group with a made-up client ID
// and leaves cannot make the workers abort another program's
// transactions.
func TestWorkerMembersOnlyThisGroupsWorkers(t *testing.T) {
	n := newNonce()
	got := workerMembers("hg", []string{
		memberClientID("hg-w1", n),
		memberClientID("hg-w2", "0123456789abcdef"),
		memberClientID("payments-tx", n), // another program's transactional ID
		memberClientID("hg", n),          // no worker ID
		memberClientID("hgx-w1", n),
		"kgo",
	})
	want := map[string][]string{"hg-w1": {n}, "hg-w2": {"0123456789abcdef"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for id, ns := range want {
		if !slices.Equal(got[id], ns) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestStaticTwinByMemberID: a static member's twin is the member with its
// instance ID and another member ID, whatever client ID the group lists
// (the coordinator keeps the replaced member's); its own membership,
// still listed after its session ended, is no twin.
func TestStaticTwinByMemberID(t *testing.T) {
	inst, other := "w1", "w2"
	m := func(member string, instance *string, cid string) kadm.DescribedGroupMember {
		return kadm.DescribedGroupMember{MemberID: member, InstanceID: instance, ClientID: cid}
	}
	mine := memberClientID("g-w1", "0123456789abcdef")
	cases := []struct {
		ms        []kadm.DescribedGroupMember
		own, want string
	}{
		{[]kadm.DescribedGroupMember{m("w1-a", &inst, mine), m("w2-a", &other, "x")}, "w1-a", ""},
		{[]kadm.DescribedGroupMember{m("w1-b", &inst, mine), m("w2-a", &other, "x")}, "w1-a", "w1-b"}, // replaced: same client ID
		{[]kadm.DescribedGroupMember{m("w2-a", &other, "x")}, "w1-a", ""},                             // removed: out of the group
		{[]kadm.DescribedGroupMember{m("w1-b", &inst, mine)}, "", "w1-b"},                             // never a member itself
		{[]kadm.DescribedGroupMember{m("w1-b", nil, mine)}, "w1-a", ""},                               // a dynamic member
	}
	for i, c := range cases {
		if got := staticTwin(c.ms, inst, c.own); got != c.want {
			t.Errorf("case %d: twin %q, want %q", i, got, c.want)
		}
	}
}

// TestHeartbeatInterval: a third of the session timeout, at most 500 ms,
// so a survivor learns of a dead worker's expiry within half a second.
func TestHeartbeatInterval(t *testing.T) {
	for _, c := range []struct{ session, want time.Duration }{
		{6 * time.Second, 500 * time.Millisecond},
		{30 * time.Minute, 500 * time.Millisecond},
		{900 * time.Millisecond, 300 * time.Millisecond},
	} {
		if got := heartbeatInterval(c.session); got != c.want {
			t.Errorf("session timeout %v: heartbeat every %v, want %v", c.session, got, c.want)
		}
	}
}
