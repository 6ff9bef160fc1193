package remoting

import (
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"
)

func lockReq(group, client string, mqs []mqRef) *Command {
	body, _ := json.Marshal(lockBody{ConsumerGroup: group, ClientID: client, MQSet: mqs})
	return &Command{Code: codeLockBatchMQ, Body: body}
}

// queues names n queues of made-up topics, from queue 0 of topic
// prefix+"0" on.
func queues(prefix string, n int) []mqRef {
	mqs := make([]mqRef, n)
	for i := range mqs {
		mqs[i] = mqRef{Topic: prefix + strconv.Itoa(i/16), QueueID: i % 16}
	}
	return mqs
}

func (t *lockTable) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.locks)
}

// TestLockHostile: a lock request naming a bad topic, group or queue ID
// gets INVALID_PARAMETER and takes nothing; one connection holds at most
// maxConnLocks locks (a request past that takes none and fails), and
// its locks end with it; another group's lock on the same queue is its
// own, and another client of the group does not get a held queue.
func TestLockHostile(t *testing.T) {
	b := startTest(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for name, req := range map[string]*Command{
		"bad topic":        lockReq("g", "c", []mqRef{{Topic: "bad topic!", QueueID: 0}}),
		"negative queue":   lockReq("g", "c", []mqRef{{Topic: "orders", QueueID: -1}}),
		"huge queue":       lockReq("g", "c", []mqRef{{Topic: "orders", QueueID: 1 << 30}}),
		"bad group":        lockReq("g\nx", "c", []mqRef{{Topic: "orders", QueueID: 0}}),
		"too many at once": lockReq("g", "c", queues("t", maxConnLocks+1)),
	} {
		if resp := exchange(t, nc, req); resp.Code != respInvalidParameter || resp.Remark == "" {
			t.Errorf("%s: %d %q, want INVALID_PARAMETER with a reason", name, resp.Code, resp.Remark)
		}
	}
	if n := b.srv.locks.size(); n != 0 {
		t.Fatalf("refused requests took %d locks", n)
	}
	// Up to the limit, in two requests; then one more is refused.
	for _, mqs := range [][]mqRef{queues("a", maxConnLocks/2), queues("b", maxConnLocks/2)} {
		resp := exchange(t, nc, lockReq("g", "c", mqs))
		var got map[string][]mqRef
		if resp.Code != respSuccess || json.Unmarshal(resp.Body, &got) != nil || len(got["lockOKMQSet"]) != len(mqs) {
			t.Fatalf("lock %d queues: %d %q %d locked", len(mqs), resp.Code, resp.Remark, len(got["lockOKMQSet"]))
		}
	}
	if resp := exchange(t, nc, lockReq("g", "c", queues("c", 1))); resp.Code != respInvalidParameter {
		t.Fatalf("lock past %d on one connection: %d %q", maxConnLocks, resp.Code, resp.Remark)
	}
	// Renewing what it holds is not past the limit.
	if resp := exchange(t, nc, lockReq("g", "c", queues("a", 8))); resp.Code != respSuccess {
		t.Fatalf("renew: %d %q", resp.Code, resp.Remark)
	}
	// Another client of the group does not get a held queue; another
	// group locks the same queue for itself.
	held := queues("a", 1)
	nc2, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	for group, want := range map[string]int{"g": 0, "other": 1} {
		resp := exchange(t, nc2, lockReq(group, "intruder", held))
		var got map[string][]mqRef
		if resp.Code != respSuccess || json.Unmarshal(resp.Body, &got) != nil || len(got["lockOKMQSet"]) != want {
			t.Fatalf("group %s locks a queue client c of g holds: %d %q %v, want %d locked", group, resp.Code, resp.Remark, got, want)
		}
	}
	nc.Close()
	for deadline := time.Now().Add(10 * time.Second); b.srv.locks.size() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d locks held after the connection that took them closed, want 1 (the other group's)", b.srv.locks.size())
		}
	}
}

// TestLockLimitCountsExpired: a connection's expired locks make room
// for new ones.
func TestLockLimitCountsExpired(t *testing.T) {
	lt := newLockTable()
	c := &conn{}
	now := time.Unix(1000, 0)
	if _, err := lt.lock(c, &lockBody{ConsumerGroup: "g", ClientID: "c", MQSet: queues("a", maxConnLocks)}, now); err != nil {
		t.Fatal(err)
	}
	more := &lockBody{ConsumerGroup: "g", ClientID: "c", MQSet: queues("b", 1)}
	if _, err := lt.lock(c, more, now.Add(lockTTL-time.Second)); err == nil {
		t.Fatal("a lock past the limit was taken while the others held")
	}
	got, err := lt.lock(c, more, now.Add(lockTTL))
	if err != nil || len(got) != 1 {
		t.Fatalf("after the others expired: %v %v", got, err)
	}
	if n := lt.size(); n != 1 {
		t.Fatalf("%d locks, want 1", n)
	}
	lt.dropConn(c)
	if n, m := lt.size(), len(lt.byConn); n != 0 || m != 0 {
		t.Fatalf("after the connection: %d locks, %d counts", n, m)
	}
}
