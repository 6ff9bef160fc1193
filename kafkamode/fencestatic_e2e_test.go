package kafkamode_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKafkaTwoLiveStaticWorkersOneID: as TestKafkaTwoLiveWorkersOneID,
// with static membership. The second worker replaces the first's
// membership (same group.instance.id), and the group coordinator keeps
// the replaced member's client ID, so the group lists the first worker's
// nonce under the second's membership: the nonce cannot tell the two
// apart. The first, fenced (by PRODUCER_FENCED or INVALID_PRODUCER_EPOCH,
// whichever request meets the new epoch), must still see its twin and
// exit naming it, rather than join again and fence the second in turn;
// the second carries on. Nothing lost, duplicated or early.
func TestKafkaTwoLiveStaticWorkersOneID(t *testing.T) {
	e := newEnv(t, 2)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	a := e.startWorker("twin", "--static-membership")
	fenceLoad(e, l, "m", 1500, 2*time.Second, 15*time.Second)
	c.waitFor(t, 100, 30*time.Second)
	b := e.startWorker("twin", "--static-membership")
	select {
	case <-a.done:
	case <-b.done:
		t.Fatalf("the second worker exited; want the first, fenced by it, to exit:\n%s", b.out.String())
	case <-time.After(45 * time.Second):
		t.Fatal("the first worker did not exit within 45 s of its twin's start")
	}
	if out := a.out.String(); !strings.Contains(out, "another live worker uses worker ID") {
		t.Fatalf("the first worker exited without naming its twin:\n%s", out)
	}
	got := e.settle(c, l, 60*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatalf("%s", v)
	}
	if st := b.stop(t); st["forwarded"] < 1 {
		t.Errorf("the twin forwarded %d; want it to carry on", st["forwarded"])
	}
}

// TestKafkaFenceRestartedStaticMember: a static member restarted in place
// (kill -9, started again with its worker ID) is not taken for a second
// live worker with its ID when its epoch is bumped later. The group
// coordinator keeps the client ID of the member a static member replaces,
// so the group still lists the dead process's nonce under the new
// process's membership. Here the new process is frozen inside a
// transaction past the transaction timeout: the coordinator aborts it and
// bumps the epoch, and the resumed worker, which the group still lists,
// must join again rather than exit. Nothing lost, duplicated or early.
func TestKafkaFenceRestartedStaticMember(t *testing.T) {
	e := newEnv(t, 2)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	flags := []string{"--static-membership", "--session-timeout", "30s", "--txn-timeout", "3s"}
	w := e.startWorker("w1", flags...)
	var warm []msg
	for i := 0; i < 20; i++ {
		warm = append(warm, msg{id: fmt.Sprintf("a%02d", i), due: time.Now().UnixMilli() + 500})
	}
	e.produce(l, warm)
	c.waitFor(t, len(warm), 60*time.Second)
	w.kill(t)
	w = e.startWorker("w1", flags...)
	fenceLoad(e, l, "m", 3000, 2*time.Second, 20*time.Second)
	c.waitFor(t, len(warm)+100, 60*time.Second) // the restarted worker forwards
	freezeInTxn(t, e, w, e.group+"-w1")
	time.Sleep(6 * time.Second) // past the 3 s transaction timeout, within the 30 s session
	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	got := e.settle(c, l, 90*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatalf("%s", v)
	}
	select {
	case <-w.done:
		t.Fatalf("the restarted worker exited after its transaction timed out; want it to join again:\n%s", w.out.String())
	default:
	}
	st := w.stop(t)
	if out := w.out.String(); strings.Contains(out, "another live worker") {
		t.Errorf("the restarted worker took itself for its twin:\n%s", out)
	}
	if st["forwarded"] < 1 {
		t.Errorf("forwarded %d; want the worker to carry on", st["forwarded"])
	}
}
