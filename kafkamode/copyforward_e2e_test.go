package kafkamode_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	w := e.startWorker("w1", "--body-lead", "1s")
	now := time.Now().UnixMilli()
	var msgs []msg
	for i := 0; i < 5; i++ {
		msgs = append(msgs, msg{id: fmt.Sprintf("c%d", i), due: now + 10000 + int64(i)*100})
	}
	msgs = append(msgs, msg{id: "soon", due: now + 500})
	e.produce(l, msgs)
	got := e.settle(c, l, 60*time.Second)
	v := l.check(got)
	t.Logf("copy-forward: %s; lateness %s", v, v.latenessSummary())
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	st := w.stop(t)
	t.Logf("worker: %v", st)
	if st["dead_lettered"] != 0 {
		t.Errorf("%d records dead-lettered, want 0", st["dead_lettered"])
	}
	if st["copied_forward"] < 5 {
		t.Errorf("%d copies forward, want at least one per long-pending message (5)", st["copied_forward"])
	}
	if st["forwarded"] != 6 {
		t.Errorf("forwarded %d, want 6", st["forwarded"])
	}
}
