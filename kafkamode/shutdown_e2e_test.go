package kafkamode_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaSIGTERMLeavesNoDuplicates: a worker stopped with SIGTERM (a
// deploy, a scale-down) while messages fall due commits what it
// forwarded before it exits, in both delivery modes: at least once
// promises a second delivery only after a crash. Three times, messages
// fall due while the worker is stopped and started again (once with a
// new worker ID, so nothing of the old incarnation is fenced by ID);
// every message arrives once, none early, and none carries
// hourglass-redelivery twice over.
func TestKafkaSIGTERMLeavesNoDuplicates(t *testing.T) {
	for _, mode := range []string{kafkamode.DeliveryExactlyOnce, kafkamode.DeliveryAtLeastOnce} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, 2)
			c := e.collect(e.biz)
			l := &ledger{due: map[string]int64{}}
			flags := []string{"--delivery", mode}
			w := e.startWorker("w1", flags...)
			waitAssigned(t, w)
			for round := 0; round < 3; round++ {
				now := time.Now().UnixMilli()
				var ms []msg
				for i := 0; i < 1000; i++ {
					// 1,000 due over 2 s, 2 ms apart: forwards are in
					// flight whenever the SIGTERM arrives.
					ms = append(ms, msg{id: fmt.Sprintf("r%d-%04d", round, i), due: now + 500 + int64(i)*2})
				}
				e.produce(l, ms)
				c.waitFor(t, c.count()+300, 30*time.Second)
				st := w.stop(t)
				if st["forwarded"] < 1 {
					t.Fatalf("round %d: the stopped worker forwarded nothing (%v): the stop did not fall mid-stream", round, st)
				}
				id := "w1"
				if round == 1 {
					id = "w2"
				}
				w = e.startWorker(id, flags...)
			}
			got := e.settle(c, l, 2*time.Minute)
			_ = w.stop(t)
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, r := range c.recs {
				if v, ok := header(r, kafkamode.HeaderRedelivery); ok && mode == kafkamode.DeliveryExactlyOnce {
					t.Errorf("%s: exactly once, yet %s=%q", r.Value, kafkamode.HeaderRedelivery, v)
				}
			}
			if v := l.check(got); !v.ok() {
				t.Fatalf("%s, 3 SIGTERMs mid-stream: %s", mode, v)
			}
		})
	}
}

// TestKafkaSIGTERMEndsItsTransaction: a worker stopped with SIGTERM while
// it forwards, and not replaced, leaves no transaction open behind it: a
// read_committed consumer of the business topic reads past the stop at
// once, not after --txn-timeout (here 60 s), which is when Kafka would
// abort a transaction left open.
func TestKafkaSIGTERMEndsItsTransaction(t *testing.T) {
	e := newEnv(t, 2)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	w := e.startWorker("w1", "--txn-timeout", "60s", "--max-batch", "5")
	waitAssigned(t, w)
	now := time.Now().UnixMilli()
	var ms []msg
	for i := 0; i < 2000; i++ {
		ms = append(ms, msg{id: fmt.Sprintf("m%04d", i), due: now + 500 + int64(i)})
	}
	e.produce(l, ms)
	c.waitFor(t, 300, 30*time.Second)
	st := w.stop(t)
	stopped := time.Now()
	if st["forwarded"] < 300 || st["forwarded"] >= 2000 {
		t.Fatalf("the worker forwarded %d of 2,000: the stop did not fall mid-stream", st["forwarded"])
	}
	// A sentinel after the stop in every business partition: read_committed
	// consumers see it once no transaction before it is open.
	adm := kadm.NewClient(e.cl)
	parts, err := adm.ListEndOffsets(t.Context(), e.biz)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	parts.Each(func(lo kadm.ListedOffset) {
		r := &kgo.Record{Topic: e.biz, Partition: lo.Partition, Value: []byte("sentinel")}
		if err := e.manual().ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		n++
	})
	for {
		c.mu.Lock()
		seen := 0
		for _, r := range c.recs {
			if string(r.Value) == "sentinel" {
				seen++
			}
		}
		c.mu.Unlock()
		if seen == n {
			break
		}
		if time.Since(stopped) > 30*time.Second {
			t.Fatalf("%d of %d business partitions readable 30 s after the stop: the stopped worker left its transaction open", seen, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("every business partition readable %v after the stop", time.Since(stopped).Round(time.Millisecond))
}
