package kafkamode_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaUpgradeFromMarkers: a state topic as the version before left
// it (def821c's format, written here by hand): one message due in an hour
// at offset 0, 3,000 behind it already forwarded and each resolved by a
// live marker "<delay topic>/0/<offset>", and the group's offset 0
// committed with a member ID as metadata. A worker of this version must
// count those markers resolved (forward none of them again), carry them
// into its own records and tombstone them, and a snapshot must follow the
// tombstones: the next take-over then reads a handful of state records,
// and the partition keeps a handful of live keys. New messages behind the
// head are delivered once, none early.
func TestKafkaUpgradeFromMarkers(t *testing.T) {
	e := newEnv(t, 1)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	now := time.Now().UnixMilli()
	e.produce(nil, []msg{{id: "head", due: now + 3600_000}})
	const old = 3000
	var forwarded []msg
	for j := 0; j < old; j++ {
		forwarded = append(forwarded, msg{id: fmt.Sprintf("old%05d", j), due: now - 1000})
	}
	e.produce(nil, forwarded) // not in the ledger: an arrival is unknown
	ctx := t.Context()
	adm := kadm.NewClient(e.cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": ptr("compact")}, e.state); err != nil {
		t.Fatal(err)
	}
	markers := make([]*kgo.Record, 0, old)
	for o := 1; o <= old; o++ {
		markers = append(markers, &kgo.Record{Topic: e.state, Partition: 0,
			Key: []byte(e.delay + "/0/" + strconv.Itoa(o)), Value: []byte("resolved")})
	}
	if err := e.manual().ProduceSync(ctx, markers...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: e.delay, Partition: 0, At: 0, LeaderEpoch: -1, Metadata: "member-of-an-older-worker"})
	if err := adm.CommitAllOffsets(ctx, e.group, offs); err != nil {
		t.Fatal(err)
	}

	w := e.startWorker("w1", "--snapshot-interval", "500ms")
	waitAssigned(t, w)
	var fresh []msg
	now = time.Now().UnixMilli()
	for j := 0; j < 500; j++ {
		fresh = append(fresh, msg{id: fmt.Sprintf("new%05d", j), due: now + 1500})
	}
	e.produce(l, fresh)
	c.waitFor(t, len(fresh), time.Minute)
	waitSnapshot(t, e, 0, int64(old+len(fresh))+1)
	st := w.stop(t)
	if st["forwarded"] != int64(len(fresh)) {
		t.Fatalf("the upgraded worker forwarded %d, want the %d new messages only: %v", st["forwarded"], len(fresh), st)
	}
	keys, records := liveStateKeys(t, e, 0)
	t.Logf("after the upgraded worker: %d live state keys (%d records)", keys, records)
	if keys > 10 {
		t.Errorf("%d live state keys after the upgrade, want the older worker's markers tombstoned (a handful)", keys)
	}

	w2 := e.startWorker("w1")
	cancel := &kgo.Record{Topic: e.delay, Key: []byte("head"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderCancel, Value: []byte("offset:0")}}}
	if err := e.cl.ProduceSync(ctx, cancel).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := e.settle(c, l, 2*time.Minute)
	if v := l.check(got); !v.ok() {
		t.Fatalf("%s", v)
	}
	st = w2.stop(t)
	t.Logf("next take-over: %d state records read, %d forwarded", st["state_records_read"], st["forwarded"])
	if st["state_records_read"] > 20 || st["forwarded"] != 0 {
		t.Errorf("the next take-over read %d state records and forwarded %d; want a handful and 0 (the snapshot after the tombstones)",
			st["state_records_read"], st["forwarded"])
	}
}

func ptr(s string) *string { return &s }
