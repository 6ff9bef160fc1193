package remoting

import (
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"
)

// broadcastHeartbeat is a heartbeat of client id for n broadcasting
// groups, each subscribing to one topic, and n producer groups.
func broadcastHeartbeat(id string, n int) *Command {
	type sub struct {
		Topic     string `json:"topic"`
		SubString string `json:"subString"`
	}
	type cons struct {
		GroupName           string `json:"groupName"`
		MessageModel        string `json:"messageModel"`
		SubscriptionDataSet []sub  `json:"subscriptionDataSet"`
	}
	type prod struct {
		GroupName string `json:"groupName"`
	}
	hb := struct {
		ClientID        string `json:"clientID"`
		ConsumerDataSet []cons `json:"consumerDataSet"`
		ProducerDataSet []prod `json:"producerDataSet"`
	}{ClientID: id}
	for i := 0; i < n; i++ {
		g := "g" + strconv.Itoa(i)
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, cons{g, "BROADCASTING", []sub{{"orders", "*"}}})
		hb.ProducerDataSet = append(hb.ProducerDataSet, prod{g})
	}
	body, _ := json.Marshal(hb)
	return &Command{Code: codeHeartBeat, Body: body}
}

// counts is the registry's groups, and what c's entries use (their
// bytes, and one more if any is still indexed under c).
func (r *registry) counts(c *conn) (groups, used int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	used = r.used[c]
	if len(r.keys[c]) > 0 && used == 0 {
		used = 1
	}
	return len(r.consumers) + len(r.producers), used
}

// TestHeartbeatRegistryBounded: what one connection's heartbeats keep is
// bounded (a heartbeat past it is refused with a reason and records
// nothing), a heartbeat repeated keeps no more, another connection is
// served meanwhile, and a connection's end forgets its groups too.
func TestHeartbeatRegistryBounded(t *testing.T) {
	b := startTest(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if resp := exchange(t, nc, broadcastHeartbeat("steady", 10)); resp.Code != respSuccess {
		t.Fatalf("heartbeat: %d %q", resp.Code, resp.Remark)
	}
	var c *conn
	b.srv.mu.Lock()
	for cc := range b.srv.conns {
		c = cc
	}
	b.srv.mu.Unlock()
	_, once := b.srv.clients.counts(c)
	for i := 0; i < 20; i++ {
		exchange(t, nc, broadcastHeartbeat("steady", 10))
	}
	if _, again := b.srv.clients.counts(c); again != once || once == 0 {
		t.Fatalf("a heartbeat repeated keeps %d bytes, once %d", again, once)
	}
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		_, before := b.srv.clients.counts(c)
		resp := exchange(t, nc, broadcastHeartbeat("forged-"+strconv.Itoa(i), 2000))
		_, after := b.srv.clients.counts(c)
		switch {
		case resp.Code == respSuccess:
		case resp.Code == respInvalidParameter && resp.Remark != "" && after == before:
			refused = true
		default:
			t.Fatalf("heartbeat %d: %d %q, %d bytes kept before, %d after", i, resp.Code, resp.Remark, before, after)
		}
		if after > maxConnRegistry {
			t.Fatalf("a connection keeps %d bytes of registrations, past %d", after, maxConnRegistry)
		}
	}
	if !refused {
		t.Fatal("100 heartbeats of 2,000 made-up groups each were all kept")
	}
	if resp := b.request(t, broadcastHeartbeat("other", 10)); resp.Code != respSuccess {
		t.Fatalf("another connection's heartbeat: %d %q", resp.Code, resp.Remark)
	}
	nc.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		groups, used := b.srv.clients.counts(c)
		if groups == 0 && used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after its connection closed: %d groups and %d bytes kept", groups, used)
		}
	}
}
