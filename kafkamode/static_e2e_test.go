package kafkamode_test

import (
	"fmt"
	"testing"
	"time"
)

// TestKafkaStaticRestart (issue 27, failover): a static member
// (--static-membership, group.instance.id = --worker-id) killed with -9
// and restarted by its supervisor at once gets its partitions back
// without a rebalance: the messages due just after the restart fire
// within seconds of it, although the session timeout is 30 s. A dynamic
// member's restart joins as a new member, and the rebalance that
// follows waits for the dead member's session to time out (30 s here).
// Every message arrives once, none early.
func TestKafkaStaticRestart(t *testing.T) {
	e := newEnv(t, 2)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	flags := []string{"--static-membership", "--session-timeout", "30s"}
	w := e.startWorker("w1", flags...)
	var warm []msg
	for i := 0; i < 20; i++ {
		warm = append(warm, msg{id: fmt.Sprintf("a%02d", i), due: time.Now().UnixMilli() + 500})
	}
	e.produce(l, warm)
	c.waitFor(t, len(warm), 60*time.Second) // the worker owns both partitions
	w.kill(t)
	restart := time.Now()
	var after []msg
	for i := 0; i < 20; i++ {
		after = append(after, msg{id: fmt.Sprintf("b%02d", i), due: restart.UnixMilli() + 1000})
	}
	e.produce(l, after)
	e.startWorker("w1", flags...)
	const within = 8 * time.Second // target 2 s; the machine is shared
	c.waitFor(t, len(warm)+len(after), within)
	t.Logf("the %d messages due 1 s after the restart were all read %v after it", len(after), time.Since(restart).Round(time.Millisecond))
	got := e.settle(c, l, 60*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatal(v)
	}
}
