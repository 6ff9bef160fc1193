package kafkamode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/kafkamode"
	"github.com/hourglass-mq/hourglass/kafkamode/kafkahttp"
)

// TestKafkaCopyForward: the delay topic keeps records 4 s (retention.ms),
// in segments of 500 ms; messages are due 10 s out. The worker must copy
// each forward (at half the retention, again and again) and deliver it
// once, not early, not dead-lettered.
func TestKafkaCopyForward(t *testing.T) {
	e := newEnv(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := kadm.NewClient(e.cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("4000")},
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("500")},
	}, e.delay)
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatalf("set the delay topic's retention: %v", err)
	}
	e.copies = true
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	addr := freeAddr(t)
	w := e.startWorker("w1", "--body-lead", "1s", "--listen", addr)
	now := time.Now().UnixMilli()
	var msgs []msg
	for i := 0; i < 5; i++ {
		msgs = append(msgs, msg{id: fmt.Sprintf("c%d", i), due: now + 10000 + int64(i)*100})
	}
	msgs = append(msgs, msg{id: "soon", due: now + 500})
	e.produce(l, msgs)
	raw := produceRaw(t, ctx, e, "raw-copied", []kgo.RecordHeader{
		{Key: kafkamode.HeaderDelayMs, Value: []byte("15000")}, {Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}})
	cancelACopiedMessage(t, ctx, e, addr)
	cancelACopiedRecord(t, ctx, e, addr, raw)
	got := e.settle(c, l, 60*time.Second)
	v := l.check(got)
	t.Logf("copy-forward: %s; lateness %s", v, v.latenessSummary())
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	inspectDelivered(t, addr)
	st := w.stop(t)
	t.Logf("worker: %v", st)
	if st["dead_lettered"] != 0 {
		t.Errorf("%d records dead-lettered, want 0", st["dead_lettered"])
	}
	if st["copied_forward"] < 6 {
		t.Errorf("%d copies forward, want at least one per long-pending message (5)", st["copied_forward"])
	}
	if st["forwarded"] != 6 || st["cancelled"] != 2 {
		t.Errorf("forwarded %d, cancelled %d; want 6 and 2", st["forwarded"], st["cancelled"])
	}
}

// produceRaw produces a record with key k and headers hs to the delay
// topic's partition 0 with a plain Kafka client and returns its offset.
func produceRaw(t *testing.T, ctx context.Context, e *env, k string, hs []kgo.RecordHeader) int64 {
	t.Helper()
	r := &kgo.Record{Topic: e.delay, Partition: 0, Key: []byte(k), Value: []byte(k), Headers: hs}
	if err := e.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", k, err)
	}
	return r.Offset
}

// waitCopies inspects the message id until it names two copies forward
// in turn (the second a copy of the first, whose copy record has been
// read back and pruned by then).
func waitCopies(t *testing.T, ctx context.Context, url, id string) api.KafkaMessageInfo {
	t.Helper()
	var in api.KafkaMessageInfo
	var copies []string
	for len(copies) < 2 {
		if in = inspectKafka(t, ctx, url); in.State != "pending" {
			t.Fatalf("inspect %s while it is copied forward: %+v; want pending (not cancelled)", id, in)
		}
		if in.CopyID != "" && (len(copies) == 0 || copies[len(copies)-1] != in.CopyID) {
			copies = append(copies, in.CopyID)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("copies forward of %s seen: %v, want 2; last inspect %+v", id, copies, in)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return in
}

// cancelACopiedRecord cancels the message produced at offset off (key
// raw-copied) with a cancel record a plain Kafka client produces, naming
// that original offset, after two copies forward: the cancel must reach
// the latest copy, though no copy record ties it to the original any
// more (the copy's entry does), and though the original itself is gone
// (deleteOriginal, run before, deletes it too: it lies below). It is not in the ledger: a delivery would
// be an unknown ID.
func cancelACopiedRecord(t *testing.T, ctx context.Context, e *env, addr string, off int64) {
	t.Helper()
	id := fmt.Sprintf("k:0:%d", off)
	url := "http://" + addr + "/v1/messages/" + id
	waitCopies(t, ctx, url, id)
	produceRaw(t, ctx, e, "raw-copied", []kgo.RecordHeader{{Key: kafkamode.HeaderCancel, Value: []byte(fmt.Sprintf("offset:%d", off))}})
	for {
		in := inspectKafka(t, ctx, url)
		if in.State == "cancelled" && in.CopyID != "" {
			return
		}
		if in.State != "pending" {
			t.Fatalf("inspect %s after a cancel record naming its original offset: %+v; want cancelled, with its copy's ID", id, in)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still pending after a cancel record naming its original offset: %+v", id, in)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cancelACopiedMessage sends a message through the HTTP API, waits until
// inspect by its ID names a copy forward (the original, deleted by
// retention soon, is no longer the message) and then a second one (a
// copy of the copy: by then the first copy's record, which tied it to the
// original offset, has been read back and pruned), deletes its original
// as retention would (deleteOriginal), and cancels it by its original ID:
// the cancel must reach the latest copy, which is then never delivered
// (it is not in the ledger: a delivery would be an unknown ID), and
// inspect by that ID must then say cancelled, not 404.
func cancelACopiedMessage(t *testing.T, ctx context.Context, e *env, addr string) {
	t.Helper()
	cl := client.New("http://"+addr, client.WithToken(""))
	waitUp(t, ctx, cl)
	r, err := cl.Send(ctx, e.biz, client.Message{Key: "copied", Body: []byte("x"), When: client.When{Delay: 15 * time.Second}})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	inspect := func() (in api.KafkaMessageInfo) {
		return inspectKafka(t, ctx, "http://"+addr+"/v1/messages/"+r.ID)
	}
	in := waitCopies(t, ctx, "http://"+addr+"/v1/messages/"+r.ID, r.ID)
	if in.ID != r.ID || in.State != "pending" || in.Due != r.Due {
		t.Fatalf("inspect of a copied message: %+v; want id %s, pending, due %d", in, r.ID, r.Due)
	}
	deleteOriginal(t, ctx, e, "http://"+addr+"/v1/messages/"+r.ID)
	if in = inspect(); in.ID != r.ID || in.State != "pending" || in.CopyID == "" {
		t.Fatalf("inspect of a copied message whose original retention deleted: %+v; want id %s, pending, with its copy's ID", in, r.ID)
	}
	if err := cl.Cancel(ctx, r.ID); err != nil {
		t.Fatalf("cancel %s by its original ID after it was copied: %v", r.ID, err)
	}
	if in := inspect(); in.State != "cancelled" || in.CopyID == "" {
		t.Fatalf("inspect %s after its cancel: %+v; want cancelled, with its copy's ID", r.ID, in)
	}
}

// deleteOriginal does to the message inspected at url (a copied one,
// still pending) what the delay topic's retention does to its original
// record. This test's retention.ms allows that after 4 s, but the broker
// deletes only when its retention check runs (by Kafka's defaults 30 s
// after it starts, then every 5 minutes), so a run met it only now and
// then, and failed with a 404 from inspect or cancel by the original ID.
// It deletes the partition's records up to and including the original,
// once the group's committed offset is past it (so every record it
// deletes is resolved, as retention would find them after copy-forward).
// The message keeps its ID: inspect, cancel and reschedule by it must
// still follow its copies.
func deleteOriginal(t *testing.T, ctx context.Context, e *env, url string) {
	t.Helper()
	in := inspectKafka(t, ctx, url)
	p, o, err := kafkahttp.ParseID(in.ID)
	if err != nil {
		t.Fatalf("inspect answered ID %q: %v", in.ID, err)
	}
	for in.CommittedOffset <= o {
		select {
		case <-ctx.Done():
			t.Fatalf("the group's committed offset stays at %d, not past %s", in.CommittedOffset, in.ID)
		case <-time.After(100 * time.Millisecond):
		}
		in = inspectKafka(t, ctx, url)
	}
	to := kadm.Offsets{}
	to.Add(kadm.Offset{Topic: e.delay, Partition: p, At: o + 1})
	rs, err := kadm.NewClient(e.cl).DeleteRecords(ctx, to)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatalf("delete the records of %s/%d below %d: %v", e.delay, p, o+1, err)
	}
}

// inspectDelivered inspects c0, the first record of the delay topic
// (offset 0), after its delivery: it was copied forward and its original
// deleted (deleteOriginal deletes the records below the HTTP message's,
// c0's among them), so inspect reaches it through a copy, and its forward
// names the original's position, not the copy's. Delivered, it must read
// as visible, not as cancelled.
func inspectDelivered(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := inspectKafka(t, ctx, "http://"+addr+"/v1/messages/k:0:0")
	if in.Key != "c0" || in.State != "visible" || in.CopyID == "" {
		t.Errorf("inspect k:0:0 (c0, copied forward, its original deleted, then delivered): %+v; want key c0, visible, with a copy's ID", in)
	}
}

// inspectKafka GETs a Kafka-mode inspect URL; a 503 (the group's
// coordinator not up yet on a fresh Kafka) is asked again until ctx ends.
func inspectKafka(t *testing.T, ctx context.Context, url string) (in api.KafkaMessageInfo) {
	t.Helper()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		code := resp.StatusCode
		err = json.NewDecoder(resp.Body).Decode(&in)
		resp.Body.Close()
		switch {
		case code == http.StatusServiceUnavailable:
			time.Sleep(100 * time.Millisecond)
			continue
		case code != http.StatusOK || err != nil:
			t.Fatalf("GET %s: %d %v", url, code, err)
		}
		return in
	}
}
