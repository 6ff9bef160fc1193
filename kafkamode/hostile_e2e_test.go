package kafkamode_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaLargeRecordForwarded: a record of about 1 MB, which the broker
// takes into the delay topic under its default max.message.bytes (1 MiB
// and 12 bytes; the Java client's max.request.size is 1 MiB), is
// forwarded whole, not dead-lettered: the worker's producer must take
// batches as large as the broker does (franz-go's default stops at
// 1,000,012 bytes, and a larger record was refused by the worker itself).
func TestKafkaLargeRecordForwarded(t *testing.T) {
	e := newEnv(t, 1)
	biz := e.collect(e.biz)
	dlq := e.collect(e.dlq)
	// Due after the body lead: the worker drops the body at read time and
	// its loader fetches the large record again.
	w := e.startWorker("w1", "--body-lead", "500ms")
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// A first record shows the worker has joined and reads the topic.
	warm := &kgo.Record{Topic: e.delay, Key: []byte("warm"), Value: []byte("warm"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderDeliverAt, Value: []byte("0")}, {Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	if err := prod.ProduceSync(t.Context(), warm).FirstErr(); err != nil {
		t.Fatal(err)
	}
	biz.waitFor(t, 1, 12*time.Second)
	now := time.Now().UnixMilli()
	big := bytes.Repeat([]byte("x"), 1_020_000)
	recs := []*kgo.Record{
		{Topic: e.delay, Key: []byte("big"), Value: big, Headers: []kgo.RecordHeader{
			{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(now+1500, 10))},
			{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}},
		{Topic: e.delay, Key: []byte("after"), Value: []byte("after"), Headers: []kgo.RecordHeader{
			{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(now+2500, 10))},
			{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}},
	}
	for _, r := range recs {
		if err := prod.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", r.Key, err)
		}
	}
	biz.waitFor(t, 2, 12*time.Second)
	biz.mu.Lock()
	first := biz.recs[1]
	biz.mu.Unlock()
	if string(first.Key) != "big" || !bytes.Equal(first.Value, big) {
		t.Fatalf("first forward: key %q, %d bytes; want the big record whole (%d bytes)", first.Key, len(first.Value), len(big))
	}
	biz.waitFor(t, 3, 12*time.Second)
	// The worker dead-letters in due order: once "after" is forwarded,
	// the big record's fate is decided. A sentinel in the dead-letter
	// topic shows the collector has read everything before it.
	if err := e.cl.ProduceSync(t.Context(), &kgo.Record{Topic: e.dlq, Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dlq.waitFor(t, 1, 10*time.Second)
	dlq.mu.Lock()
	defer dlq.mu.Unlock()
	for _, r := range dlq.recs {
		if string(r.Value) != "sentinel" {
			reason, _ := header(r, kafkamode.HeaderDLQReason)
			t.Errorf("dead letter %q: %s", r.Key, reason)
		}
	}
	if n := w.stop(t)["bodies_loaded"]; n < 1 {
		t.Errorf("bodies loaded: %d; the big record's body should have been dropped and fetched again", n)
	}
}

// TestKafkaWorkerBadTimeoutsExit: a worker whose session or transaction
// timeout Kafka (or franz-go) refuses exits at once, non-zero, saying
// which setting is wrong; it used to leave the group and join again for
// ever, forwarding nothing, with a warning a minute.
func TestKafkaWorkerBadTimeoutsExit(t *testing.T) {
	e := newEnv(t, 1)
	for _, c := range []struct{ flags, want string }{
		{"--session-timeout 2s", "session timeout 2s"},
		{"--session-timeout 4s", "group.min.session.timeout.ms"},
		{"--session-timeout 31m", "group.max.session.timeout.ms"},
		{"--txn-timeout 2h", "transaction.max.timeout.ms"},
	} {
		e.expectExit(c.flags, c.want)
	}
}

// TestKafkaAbortedAndCompressedRecords: a record of the delay topic
// written in a transaction its producer aborted is never forwarded, and
// records in batches compressed with each codec Kafka knows are
// forwarded once with their key and value.
func TestKafkaAbortedAndCompressedRecords(t *testing.T) {
	e := newEnv(t, 1)
	biz := e.collect(e.biz)
	e.startWorker("w1")
	due := strconv.FormatInt(time.Now().UnixMilli()+200, 10)
	rec := func(id string) *kgo.Record {
		return &kgo.Record{Topic: e.delay, Key: []byte(id), Value: []byte(id), Headers: []kgo.RecordHeader{
			{Key: kafkamode.HeaderDeliverAt, Value: []byte(due)}, {Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.TransactionalID(e.group+"-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	for _, commit := range []bool{false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		id := "aborted"
		if commit {
			id = "txn-committed"
		}
		if err := txn.ProduceSync(t.Context(), rec(id)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(t.Context(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"txn-committed"}
	for name, codec := range map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.ProducerBatchCompression(codec))
		if err != nil {
			t.Fatal(err)
		}
		recs := []*kgo.Record{rec(name + "-1"), rec(name + "-2")}
		err = cl.ProduceSync(t.Context(), recs...).FirstErr()
		cl.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want = append(want, name+"-1", name+"-2")
	}
	biz.waitFor(t, len(want), 12*time.Second)
	// Everything is read from one delay partition in order and is due at
	// once: a sentinel produced now arrives after every forward decided.
	if err := e.cl.ProduceSync(t.Context(), &kgo.Record{Topic: e.biz, Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	biz.waitFor(t, len(want)+1, 10*time.Second)
	biz.mu.Lock()
	defer biz.mu.Unlock()
	seen := map[string]int{}
	for _, r := range biz.recs {
		if string(r.Key) != string(r.Value) && string(r.Value) != "sentinel" {
			t.Errorf("key %q, value %q", r.Key, r.Value)
		}
		seen[string(r.Value)]++
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("%s forwarded %d times, want once", id, seen[id])
		}
	}
	if seen["aborted"] != 0 {
		t.Errorf("a record of an aborted transaction was forwarded %d times", seen["aborted"])
	}
}

// TestKafkaHTTPLargeBody: the HTTP API takes a body of about 1 MB, within
// its request limit (1 MiB) and the broker's record limit; its producer
// refused it, as too large, with franz-go's default batch limit.
func TestKafkaHTTPLargeBody(t *testing.T) {
	e := newEnv(t, 1)
	cl, ctx := e.apiWorker(15 * time.Second)
	r, err := cl.Send(ctx, e.biz, client.Message{Key: "big", Body: bytes.Repeat([]byte("x"), 1_040_000), When: client.When{Delay: time.Hour}})
	if err != nil {
		t.Fatalf("send a 1,040,000-byte body: %v", err)
	}
	if !strings.HasPrefix(r.ID, "k:0:") {
		t.Errorf("receipt %+v", r)
	}
}

// TestKafkaRefusedTopicStream: a producer that keeps writing records for a
// topic Kafka refuses (here a name that collides with an existing topic:
// with auto-creation off a missing topic is refused alike) must not hold
// up the records of other topics for long: each transaction that holds a
// refused forward aborts, and a refused record falls due every 50 ms, so
// a fresh one could be in every transaction. All are forwarded or
// dead-lettered within seconds.
func TestKafkaRefusedTopicStream(t *testing.T) {
	e := newEnv(t, 1)
	biz := e.collect(e.biz)
	dlq := e.collect(e.dlq)
	if _, err := kadm.NewClient(e.cl).CreateTopic(t.Context(), 1, 1, nil, e.delay+".taken"); err != nil {
		t.Fatal(err)
	}
	e.startWorker("w1")
	const n = 60
	start := time.Now().UnixMilli() + 2000
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		due := []byte(strconv.FormatInt(start+int64(i)*50, 10))
		for _, topic := range []string{e.delay + "_taken", e.biz} {
			recs = append(recs, &kgo.Record{Topic: e.delay, Key: []byte(topic), Value: []byte(strconv.Itoa(i)), Headers: []kgo.RecordHeader{
				{Key: kafkamode.HeaderDeliverAt, Value: due}, {Key: kafkamode.HeaderBizTopic, Value: []byte(topic)}}})
		}
	}
	if err := e.cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	biz.waitFor(t, n, time.Duration(n*50)*time.Millisecond+8*time.Second)
	dlq.waitFor(t, n, 5*time.Second)
}

// TestKafkaWorkerBadStateTopic: a state topic someone created beforehand
// that deletes old records (cleanup.policy=delete, the broker's default)
// would lose the markers of messages forwarded out of order, and a
// take-over would forward them again; a compacted delay topic deletes
// pending messages that share a key. The worker refuses each at start,
// non-zero, saying why. (A state topic with fewer partitions than the
// delay topic is grown to match: TestKafkaDelayTopicGrows.)
func TestKafkaWorkerBadStateTopic(t *testing.T) {
	e := newEnv(t, 2)
	adm := kadm.NewClient(e.cl)
	if _, err := adm.CreateTopic(t.Context(), 2, 1, nil, e.state); err != nil {
		t.Fatal(err)
	}
	compacted := e.delay + ".compacted"
	if _, err := adm.CreateTopic(t.Context(), 1, 1, map[string]*string{"cleanup.policy": new("compact")}, compacted); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ flags, want string }{
		{"", "state topic " + e.state + " has cleanup.policy=delete"},
		{"--delay-topic " + compacted, "delay topic " + compacted + " has cleanup.policy=compact"},
	} {
		e.expectExit(c.flags, c.want)
	}
}

// expectExit runs a worker with flags and expects it to exit within 15 s,
// non-zero, its output mentioning want.
func (e *env) expectExit(flags, want string) {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	args := append([]string{"kafka", "--brokers", e.addr, "--delay-topic", e.delay, "--group", e.group, "--worker-id", "bad"},
		strings.Fields(flags)...) // a second --delay-topic overrides the first
	out, err := exec.CommandContext(ctx, binary(t), args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Errorf("%q: still running after 15 s:\n%s", flags, out)
	case !errors.As(err, &exit) || exit.ExitCode() == 0:
		t.Errorf("%q: exit %v, want a non-zero exit:\n%s", flags, err, out)
	case !strings.Contains(string(out), want):
		t.Errorf("%q: output does not mention %q:\n%s", flags, want, out)
	}
}

// TestKafkaHTTPRescheduleTwice: a message rescheduled twice through the
// API. Each reschedule answers a new ID; the IDs it replaced read
// cancelled, the latest pending at the latest time, and no inspect shows
// the worker's internal hourglass-copied-from as a property of the
// message. (A reschedule is copied forward by the worker; the second one
// carried the first copy's hourglass-copied-from, so the first new ID
// followed it and read pending, and the forward named the first ID.)
func TestKafkaHTTPRescheduleTwice(t *testing.T) {
	e := newEnv(t, 1)
	e.copies = true
	c := e.collect(e.biz)
	cl, ctx := e.apiWorker(30 * time.Second)
	m, err := cl.Send(ctx, e.biz, client.Message{Key: "order-1", Body: []byte("m"), When: client.When{Delay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := cl.Reschedule(ctx, m.ID, client.When{Delay: 2 * time.Hour}, 0)
	if err != nil {
		t.Fatalf("first reschedule: %v", err)
	}
	r2, err := cl.Reschedule(ctx, r1.ID, client.When{Delay: 2 * time.Second}, 0)
	if err != nil {
		t.Fatalf("second reschedule: %v", err)
	}
	for _, w := range []struct {
		id, state string
	}{{m.ID, "cancelled"}, {r1.ID, "cancelled"}, {r2.ID, "pending"}} {
		in, err := cl.Inspect(ctx, w.id)
		if err != nil || string(in.State) != w.state {
			t.Errorf("inspect %s: %+v %v; want %s", w.id, in, err, w.state)
			continue
		}
		if _, ok := in.Properties[kafkamode.HeaderCopiedFrom]; ok {
			t.Errorf("inspect %s shows the property %s", w.id, kafkamode.HeaderCopiedFrom)
		}
	}
	l := &ledger{due: map[string]int64{"m": int64(r2.Due)}}
	if v := l.check(e.settle(c, l, 20*time.Second)); !v.ok() {
		t.Fatalf("%s", v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recs {
		if src, _ := header(r, kafkamode.HeaderSource); string(r.Value) == "m" && src != e.delay+"/0/"+strings.TrimPrefix(r2.ID, "k:0:") {
			t.Errorf("the forward's source %q, want the latest ID %s", src, r2.ID)
		}
	}
}

// apiWorker starts a worker serving the HTTP API and returns a client of
// it, once it answers, and a context that ends after within.
func (e *env) apiWorker(within time.Duration) (*client.Client, context.Context) {
	addr := freeAddr(e.t)
	e.startWorker("w1", "--listen", addr)
	cl := client.New("http://"+addr, client.WithToken(""))
	ctx, cancel := context.WithTimeout(e.t.Context(), within)
	e.t.Cleanup(cancel)
	waitUp(e.t, ctx, cl)
	return cl, ctx
}
