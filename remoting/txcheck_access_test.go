package remoting

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/access/accesstest"
)

// TestTxCheckOnlyToProducersThatMaySend: under ACL, a principal that
// heartbeats as another's producer group is not asked about (and so not
// shown) that group's half messages for a topic it may not send to; a
// producer of the group that may is.
func TestTxCheckOnlyToProducersThatMaySend(t *testing.T) {
	dir := t.TempDir()
	path, secrets := accesstest.Write(t, dir, map[string][]string{
		"producer":  {"send:orders"},
		"elsewhere": {"send:invoices"},
	})
	b := startAt(t, dir, "127.0.0.1:0", func(o *Options) {
		o.Access = accesstest.Store(t, path, "")
		o.TransactionTimeout, o.TransactionCheckInterval = time.Millisecond, time.Hour
	})
	half := &Command{Code: codeSendMessage, Body: []byte("uncommitted"), ExtFields: map[string]string{"producerGroup": "pg",
		"topic": "orders", "queueId": "0", "sysFlag": strconv.Itoa(sysTranPrepared),
		"properties": formatProperties(map[string]string{propUniqKey: "0A00000100000000000000000000BEEF", propProducerGroup: "pg", propTranPrepared: "true"})}}
	if r := b.request(t, signAs(half, "producer", secrets["producer"])); r.Code != respSuccess {
		t.Fatalf("half message: %d %q", r.Code, r.Remark)
	}
	joinAs := func(who string) net.Conn {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		hb := &Command{Code: codeHeartBeat, ExtFields: map[string]string{}, Body: []byte(`{"clientID":"` + who + `","producerDataSet":[{"groupName":"pg"}]}`)}
		if r := exchange(t, nc, signAs(hb, who, secrets[who])); r.Code != respSuccess {
			t.Fatalf("%s joins pg: %d %q", who, r.Code, r.Remark)
		}
		return nc
	}
	// checksBefore reads what the broker sent nc up to the answer of a
	// request sent after the check (answers follow what went before).
	checksBefore := func(nc net.Conn, who string) int {
		req := signAs(&Command{Code: codeGetBrokerClusterInfo, ExtFields: map[string]string{}, Opaque: 7}, who, secrets[who])
		out, _ := req.encode()
		nc.Write(out)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		n := 0
		for {
			buf, err := readFrame(nc, testLimits)
			if err != nil {
				t.Fatal(err)
			}
			c, err := decodeFrame(buf, testLimits)
			if err != nil {
				t.Fatal(err)
			}
			if c.Code == codeCheckTransactionState && !c.isResponse() {
				n++
			}
			if c.isResponse() && c.Opaque == 7 {
				return n
			}
		}
	}
	other := joinAs("elsewhere")
	for start := b.eng.Now(); b.eng.Now() <= start+1; time.Sleep(time.Millisecond) {
	}
	if err := b.srv.checkTransactions(); err != nil {
		t.Fatal(err)
	}
	waitChecksSent(t, b)
	if n := checksBefore(other, "elsewhere"); n != 0 {
		t.Fatalf("a principal that may not send to orders was asked about %d of pg's half messages", n)
	}
	owner := joinAs("producer")
	other.Close()
	if err := b.srv.checkTransactions(); err != nil {
		t.Fatal(err)
	}
	waitChecksSent(t, b)
	if n := checksBefore(owner, "producer"); n != 1 {
		t.Fatalf("the producer that may send to orders was asked %d times, want 1", n)
	}
}

// waitChecksSent waits until no connection has a transaction check being
// sent: each one started is written by then, before any later answer.
func waitChecksSent(t *testing.T, b *testBroker) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		sending := int32(0)
		b.srv.mu.Lock()
		for c := range b.srv.conns {
			sending += c.checking.Load()
		}
		b.srv.mu.Unlock()
		if sending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transaction checks still being sent", sending)
		}
	}
}

// TestTxCheckNotStalledByNonReader: a producer that never reads its
// connection, with many large half messages open, does not stall the
// transaction checks: a round returns at once (not after the write
// timeout per message), and its connection holds at most
// maxChecksSending checks being sent.
func TestTxCheckNotStalledByNonReader(t *testing.T) {
	b := startTest(t, func(o *Options) { o.TransactionTimeout, o.TransactionCheckInterval = time.Millisecond, time.Hour })
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(4 << 10)
	if r := exchange(t, nc, &Command{Code: codeHeartBeat, Body: []byte(`{"clientID":"mute","producerDataSet":[{"groupName":"pg"}]}`)}); r.Code != respSuccess {
		t.Fatalf("heartbeat: %d %q", r.Code, r.Remark)
	}
	big := bytes.Repeat([]byte{'x'}, 512<<10)
	for i := 0; i < 24; i++ {
		half := &Command{Code: codeSendMessage, Body: big, ExtFields: map[string]string{"producerGroup": "pg",
			"topic": "orders", "queueId": "0", "sysFlag": strconv.Itoa(sysTranPrepared),
			"properties": formatProperties(map[string]string{propUniqKey: fmt.Sprintf("0A0000010000000000000000%08X", i), propProducerGroup: "pg"})}}
		if r := b.request(t, half); r.Code != respSuccess {
			t.Fatalf("half message %d: %d %q", i, r.Code, r.Remark)
		}
	}
	for start := b.eng.Now(); b.eng.Now() <= start+1; time.Sleep(time.Millisecond) {
	}
	for round := 0; round < 3; round++ {
		done := make(chan error, 1)
		go func() { done <- b.srv.checkTransactions() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("check round %d stalled on a producer that does not read", round)
		}
	}
	b.srv.mu.Lock()
	defer b.srv.mu.Unlock()
	for c := range b.srv.conns {
		if n := c.checking.Load(); n > maxChecksSending {
			t.Fatalf("%d checks being sent on one connection, the bound is %d", n, maxChecksSending)
		}
	}
}
