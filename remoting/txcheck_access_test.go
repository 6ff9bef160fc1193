package remoting

import (
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
	if n := checksBefore(other, "elsewhere"); n != 0 {
		t.Fatalf("a principal that may not send to orders was asked about %d of pg's half messages", n)
	}
	owner := joinAs("producer")
	other.Close()
	if err := b.srv.checkTransactions(); err != nil {
		t.Fatal(err)
	}
	if n := checksBefore(owner, "producer"); n != 1 {
		t.Fatalf("the producer that may send to orders was asked %d times, want 1", n)
	}
}
