package commitlog

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// setUnsyncedDelay sets how long a batch of only AppendUnsynced records
// waits for its fdatasync, for one test (the tests of this package do not
// run in parallel).
func setUnsyncedDelay(t *testing.T, d time.Duration) {
	old := unsyncedSyncDelay
	unsyncedSyncDelay = d
	t.Cleanup(func() { unsyncedSyncDelay = old })
}

// countSyncs counts the File.Sync calls on fsys from now on.
func countSyncs(fsys *vfs.Faulty) *atomic.Int64 {
	var n atomic.Int64
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync {
			n.Add(1)
		}
		return nil
	})
	return &n
}

// TestUnsyncedAloneSharesTheNextSync: a batch of only AppendUnsynced
// records is answered without an fdatasync of its own; the Append after it
// is answered after one fdatasync, which covers both, so that a crash then
// keeps both.
func TestUnsyncedAloneSharesTheNextSync(t *testing.T) {
	setUnsyncedDelay(t, time.Hour) // never, within the test
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{})
	mustAppend(t, l, Record{Type: 1, Payload: []byte("before")})
	syncs := countSyncs(fsys)
	if _, err := l.AppendUnsynced(Record{Type: 1, Payload: []byte("fire")}); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 0 {
		t.Fatalf("%d fdatasyncs for a batch of only an AppendUnsynced, want 0", n)
	}
	if durablePos(l) >= l.Head() {
		t.Fatalf("durable %d covers the unsynced record (head %d) without an fdatasync", durablePos(l), l.Head())
	}
	mustAppend(t, l, Record{Type: 1, Payload: []byte("attempt")})
	if n := syncs.Load(); n != 1 {
		t.Fatalf("%d fdatasyncs for the Append after it, want 1", n)
	}
	if durablePos(l) != l.Head() {
		t.Fatalf("durable %d, head %d after an Append", durablePos(l), l.Head())
	}
	fsys.Inject(nil)
	_, recs := scanAll(t, openLog(t, mem.Crash(nil), Options{}))
	if got := fmt.Sprintf("%q", payloads(recs)); got != `["before" "fire" "attempt"]` {
		t.Fatalf("after a crash the log holds %s", got)
	}
}

// TestUnsyncedAloneSyncsSoon: with no Append to share one, the
// AppendUnsynced records get an fdatasync of their own soon after
// (WaitDurable returns, and a crash then keeps them), also while more
// such batches keep coming: each does not put it off again.
func TestUnsyncedAloneSyncsSoon(t *testing.T) {
	setUnsyncedDelay(t, 20*time.Millisecond)
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{})
	if _, err := l.AppendUnsynced(Record{Type: 1, Payload: []byte("fire")}); err != nil {
		t.Fatal(err)
	}
	waitDurableWithin(t, l, "with nothing else appended")
	_, recs := scanAll(t, openLog(t, mem.Crash(nil), Options{}))
	if got := fmt.Sprintf("%q", payloads(recs)); got != `["fire"]` {
		t.Fatalf("after WaitDurable and a crash the log holds %s", got)
	}

	// A stream of AppendUnsynced batches, one every millisecond or so,
	// each shorter than the delay apart.
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := l.AppendUnsynced(Record{Type: 1, Payload: []byte("more")}); err != nil {
				done <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	waitDurableWithin(t, l, "while AppendUnsynced batches keep coming")
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// waitDurableWithin fails the test unless WaitDurable returns nil within
// 10 s (far beyond the delay: a hang, not a slow machine).
func waitDurableWithin(t *testing.T, l *Log, what string) {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- l.WaitDurable() }()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("WaitDurable %s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("WaitDurable %s did not return", what)
	}
}

// durablePos is the log's durable position: what its fdatasyncs covered.
func durablePos(l *Log) Pos {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.durable
}
