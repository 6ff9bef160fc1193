package kafkamode_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// fenceSession is the session timeout of the fencing tests (the broker's
// minimum, 6 s by default); fenceTxnTimeout is their transaction timeout,
// long enough that a take-over waiting for it could not pass.
// fenceSlack is what the tests allow past the session timeout: the target
// is 1 s, which `hourglass bench kafka`'s drill measures (6.3 s at a 6 s
// session); a race build on a loaded CI machine has only about 0.5 s of
// that to spare, so the tests allow 5 s, still far below the 40 s a
// take-over takes without the fence.
const (
	fenceSession    = 6 * time.Second
	fenceTxnTimeout = 40 * time.Second
	fenceSlack      = 5 * time.Second
)

// freezeInTxn SIGSTOPs w at a moment when its transactional ID has a
// transaction open at the coordinator that wrote to the business topic,
// and returns when it has: the worker is then frozen inside that
// transaction, as a process killed there would be. It retries with the
// worker running in between, for up to a minute.
func freezeInTxn(t *testing.T, e *env, w *worker, txnID string) (kadm.DescribedTransaction, int64) {
	t.Helper()
	adm := kadm.NewClient(e.cl)
	deadline := time.Now().Add(time.Minute)
	for try := 0; time.Now().Before(deadline); try++ {
		stoppedAt := time.Now().UnixMilli()
		if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		txns, err := adm.DescribeTransactions(ctx, txnID)
		cancel()
		if err == nil {
			if d := txns[txnID]; d.Err == nil && d.State == "Ongoing" && stillOpen(adm, d) {
				if _, ok := d.Topics[e.biz]; ok {
					t.Logf("froze %s inside a transaction open for %d ms, after %d tries", txnID, time.Now().UnixMilli()-d.StartTimestamp, try+1)
					return d, stoppedAt
				}
			}
		}
		if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(3+try%7) * time.Millisecond)
	}
	t.Fatalf("never caught %s with a transaction open", txnID)
	return kadm.DescribedTransaction{}, 0
}

// stillOpen reports whether the transaction d, seen Ongoing just after
// its worker was frozen, is still open a moment later at the same epoch.
// An EndTxn the worker wrote to its socket just before SIGSTOP reaches
// the coordinator after the first look and ends the transaction (and,
// under transaction version 2, bumps the epoch, which the fence check
// would take for a fence): such a freeze is no freeze inside a
// transaction.
func stillOpen(adm *kadm.Client, d kadm.DescribedTransaction) bool {
	time.Sleep(200 * time.Millisecond) // a request in flight lands within it
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	txns, err := adm.DescribeTransactions(ctx, d.TxnID)
	if err != nil {
		return false
	}
	now := txns[d.TxnID]
	return now.Err == nil && now.State == "Ongoing" && now.ProducerID == d.ProducerID && now.ProducerEpoch == d.ProducerEpoch
}

// fenceLoad produces n messages due evenly over span from now+lead, so
// that transactions run all the time, and records them in l.
func fenceLoad(e *env, l *ledger, prefix string, n int, lead, span time.Duration) {
	now := time.Now().Add(lead).UnixMilli()
	ms := make([]msg, n)
	for i := range ms {
		ms[i] = msg{id: fmt.Sprintf("%s%05d", prefix, i), due: now + int64(i)*span.Milliseconds()/int64(n)}
	}
	e.produce(l, ms)
}

// overdue returns the largest (arrival - max(due, from)) over got: how
// long after from (or its due time, if later) a message waited.
func overdue(got []arrival, l *ledger, from int64) int64 {
	var worst int64
	for _, a := range got {
		if d := a.at - max(l.due[a.id], from); d > worst {
			worst = d
		}
	}
	return worst
}

// TestKafkaFenceDeadWorkersTxn: a worker SIGKILLed inside a transaction
// (one that already wrote forwards to the business partitions) is replaced
// within the session timeout plus fenceSlack. Without the fence, a
// read_committed consumer sees nothing forwarded to those partitions, by
// either worker, until the transaction timeout (40 s here) aborts it: the
// survivor fences the dead worker's transactional ID at the rebalance
// (fenceDeparted), which aborts it at once. Nothing lost, duplicated or
// early.
func TestKafkaFenceDeadWorkersTxn(t *testing.T) {
	e := newEnv(t, 4)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	args := []string{"--session-timeout", fenceSession.String(), "--txn-timeout", fenceTxnTimeout.String()}
	w1 := e.startWorker("w1", args...)
	w2 := e.startWorker("w2", args...)
	fenceLoad(e, l, "m", 3000, 3*time.Second, 20*time.Second)
	c.waitFor(t, 300, 30*time.Second)                      // both forward: the group is settled
	frozen, killAt := freezeInTxn(t, e, w1, e.group+"-w1") // its last heartbeat was before
	w1.kill(t)
	got := e.settle(c, l, 90*time.Second)
	v := l.check(got)
	worst := overdue(got, l, killAt)
	t.Logf("a worker killed inside a transaction: %s; lateness %s; the longest wait after the kill %d ms", v, v.latenessSummary(), worst)
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	if limit := (fenceSession + fenceSlack).Milliseconds(); worst > limit {
		t.Errorf("a message waited %d ms after the kill (or its due time); want at most the session timeout plus %v, %d ms", worst, fenceSlack, limit)
	}
	if st := w2.stop(t); st["fenced_departed"] < 1 && !endedByItself(t, e, frozen) {
		t.Errorf("the survivor fenced %d departed transactions; want the dead worker's", st["fenced_departed"])
	}
}

// endedByItself reports whether the transaction frozen was completed by
// the dead worker's own EndTxn rather than left open: a request the worker
// had written to its socket just before SIGSTOP reaches the coordinator
// after the freeze was seen, and then there is nothing to fence. The
// transaction is then complete at the epoch it was frozen at; a fence
// would have bumped the epoch, and one left open would still be Ongoing
// (the transaction timeout is far longer than the test).
func endedByItself(t *testing.T, e *env, frozen kadm.DescribedTransaction) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	txns, err := kadm.NewClient(e.cl).DescribeTransactions(ctx, frozen.TxnID)
	if err != nil {
		t.Logf("describe %s: %v", frozen.TxnID, err)
		return false
	}
	d := txns[frozen.TxnID]
	t.Logf("%s now: state %s, producer %d epoch %d (frozen at epoch %d)", frozen.TxnID, d.State, d.ProducerID, d.ProducerEpoch, frozen.ProducerEpoch)
	return d.Err == nil && strings.HasPrefix(d.State, "Complete") &&
		d.ProducerID == frozen.ProducerID && d.ProducerEpoch == frozen.ProducerEpoch
}

// TestKafkaFenceSlowWorkerComesBack: a worker frozen (SIGSTOP) inside a
// transaction for longer than the session timeout is removed from the
// group and fenced by the survivor, which takes its partitions over. When
// it resumes, its transaction cannot commit: it is fenced, joins the group
// again (it does not exit, as it would for a second live worker with its
// ID) and forwards again. Nothing lost, duplicated or early, and the
// messages due while it was frozen wait at most the session timeout plus
// fenceSlack.
func TestKafkaFenceSlowWorkerComesBack(t *testing.T) {
	e := newEnv(t, 4)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	args := []string{"--session-timeout", fenceSession.String(), "--txn-timeout", fenceTxnTimeout.String()}
	w1 := e.startWorker("w1", args...)
	w2 := e.startWorker("w2", args...)
	fenceLoad(e, l, "m", 4000, 3*time.Second, 25*time.Second)
	c.waitFor(t, 300, 30*time.Second)
	frozen, frozeAt := freezeInTxn(t, e, w1, e.group+"-w1")
	defer func() { _ = w1.cmd.Process.Signal(syscall.SIGCONT) }()
	// Wait until the survivor has fenced it: its transactional ID has a
	// new epoch.
	adm := kadm.NewClient(e.cl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		txns, err := adm.DescribeTransactions(ctx, e.group+"-w1")
		cancel()
		if err == nil && txns[e.group+"-w1"].ProducerEpoch != frozen.ProducerEpoch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the frozen worker's transactional ID was not fenced within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("fenced %d ms after the freeze", time.Now().UnixMilli()-frozeAt)
	if err := w1.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := c.count()
	// More work after it is back, for both workers.
	fenceLoad(e, l, "n", 1000, 2*time.Second, 5*time.Second)
	got := e.settle(c, l, 90*time.Second)
	v := l.check(got)
	worst := overdue(got, l, frozeAt)
	t.Logf("a worker frozen inside a transaction and resumed: %s; lateness %s; the longest wait after the freeze %d ms (%d delivered at the resume)",
		v, v.latenessSummary(), worst, resumed)
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	if limit := (fenceSession + fenceSlack).Milliseconds(); worst > limit {
		t.Errorf("a message waited %d ms after the freeze (or its due time); want at most the session timeout plus %v, %d ms", worst, fenceSlack, limit)
	}
	select {
	case <-w1.done:
		t.Fatalf("the resumed worker exited; want it to join again:\n%s", w1.out.String())
	default:
	}
	st1, st2 := w1.stop(t), w2.stop(t)
	if !strings.Contains(w1.out.String(), "fenced while out of the group") { // read once it exited
		t.Errorf("the resumed worker never said it was fenced out of the group:\n%s", w1.out.String())
	}
	if st1["rejoins"] < 1 || st1["forwarded"] < 1 {
		t.Errorf("resumed worker: %d rejoins, %d forwarded; want it fenced, back in the group and forwarding", st1["rejoins"], st1["forwarded"])
	}
	if st2["fenced_departed"] < 1 || st2["rejoins"] != 0 {
		t.Errorf("survivor: fenced %d departed transactions, %d rejoins; want the frozen worker's fenced and itself never fenced", st2["fenced_departed"], st2["rejoins"])
	}
}

// TestKafkaTwoLiveWorkersOneID: a second live worker with the same worker
// ID fences the first at its start (fencePrevious). They must not fence
// each other for ever: the one fenced while the other is a member of the
// group exits with an error that says so (the first, unless it rejoined
// and fenced the second before the second had joined), and the other
// carries on. Nothing lost, duplicated or early.
func TestKafkaTwoLiveWorkersOneID(t *testing.T) {
	e := newEnv(t, 2)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	a := e.startWorker("twin")
	fenceLoad(e, l, "m", 1500, 2*time.Second, 15*time.Second)
	c.waitFor(t, 100, 30*time.Second)
	b := e.startWorker("twin")
	exited, other := a, b
	select {
	case <-a.done:
	case <-b.done:
		exited, other = b, a
	case <-time.After(45 * time.Second):
		t.Fatal("neither twin exited within 45 s of the second's start")
	}
	if out := exited.out.String(); !strings.Contains(out, "another live worker uses worker ID") {
		t.Fatalf("a twin exited without naming the other:\n%s", out)
	}
	got := e.settle(c, l, 60*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatalf("%s", v)
	}
	if st := other.stop(t); st["forwarded"] < 1 {
		t.Errorf("the remaining twin forwarded %d; want it to carry on", st["forwarded"])
	}
}
