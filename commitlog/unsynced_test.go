package commitlog

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// holdSyncs makes every File.Sync wait until release is called; entered
// gets a value each time one starts waiting. A failing test releases them
// before the log's cleanup closes it.
func holdSyncs(t *testing.T, fsys *vfs.Faulty, entered chan struct{}) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	fsys.Inject(func(op vfs.Op, name string) error {
		if op != vfs.OpSync {
			return nil
		}
		entered <- struct{}{}
		<-ch
		return nil
	})
	return release
}

type appendResult struct {
	pos []Pos
	err error
}

func goAppend(l *Log, unsynced bool, payload string) chan appendResult {
	ch := make(chan appendResult, 1)
	go func() {
		f := l.Append
		if unsynced {
			f = l.AppendUnsynced
		}
		pos, err := f(Record{Type: 1, Payload: []byte(payload)})
		ch <- appendResult{pos, err}
	}()
	return ch
}

// waitResult waits for an append's answer; a deadline far beyond any
// fdatasync turns a hang into a failure instead of a stuck test.
func waitResult(t *testing.T, ch chan appendResult, what string) appendResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never returned", what)
		return appendResult{}
	}
}

// TestAppendUnsyncedAnswersBeforeFdatasync: under FlushSync an
// AppendUnsynced returns while its batch's fdatasync is still running, with
// its record already inside Head, and an Append in the same batch does not
// return until that fdatasync is done.
func TestAppendUnsyncedAnswersBeforeFdatasync(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{})
	mustAppend(t, l, Record{Type: 1, Payload: []byte("before")})
	entered := make(chan struct{}, 64)
	release := holdSyncs(t, fsys, entered)

	un := goAppend(l, true, "fire")
	<-entered // the writer is inside the batch's fdatasync, held
	r := waitResult(t, un, "AppendUnsynced with its fdatasync held")
	if r.err != nil {
		t.Fatalf("AppendUnsynced: %v", r.err)
	}
	if end := r.pos[0] + Pos(frameSize(len("fire"))); l.Head() < end {
		t.Fatalf("Head %d does not cover the unsynced record ending at %d", l.Head(), end)
	}
	// The writer is still held in that fdatasync: an Append queued now is
	// written only after it, and answered only after its own.
	durable := goAppend(l, false, "send")
	release()
	if r := waitResult(t, durable, "Append"); r.err != nil {
		t.Fatalf("Append: %v", r.err)
	}
	fsys.Inject(nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, recs := scanAll(t, openLog(t, mem.Crash(nil), Options{}))
	if got := fmt.Sprintf("%q", payloads(recs)); got != `["before" "fire" "send"]` {
		t.Fatalf("after a crash the log holds %s", got)
	}
}

// TestAppendUnsyncedSameBatchAsAppend: an Append and an AppendUnsynced
// written in one chunk: the unsynced one is answered while the chunk's
// fdatasync is held, the other only once it ends.
func TestAppendUnsyncedSameBatchAsAppend(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{})
	// Hold the writer in a first batch's fdatasync so that the next two
	// appends queue up together and go out as one chunk.
	entered := make(chan struct{}, 64)
	release := holdSyncs(t, fsys, entered)
	first := goAppend(l, false, "first")
	<-entered
	durable := goAppend(l, false, "send")
	un := goAppend(l, true, "fire")
	waitQueued(t, l, 2)
	// From now on the second batch's fdatasync is held by release2.
	release2 := holdSyncs(t, fsys, entered)
	release()
	if r := waitResult(t, first, "the first Append"); r.err != nil {
		t.Fatal(r.err)
	}
	<-entered // the second batch is in its fdatasync
	if r := waitResult(t, un, "AppendUnsynced"); r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case r := <-durable:
		t.Fatalf("Append of the same chunk returned (%v) while its fdatasync was held", r.err)
	default:
	}
	release2()
	if r := waitResult(t, durable, "Append"); r.err != nil {
		t.Fatal(r.err)
	}
	fsys.Inject(nil)
}

// waitQueued waits until n requests wait in the log's queue.
func waitQueued(t *testing.T, l *Log, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l.q.mu.Lock()
		got := len(l.q.reqs)
		l.q.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAppendUnsyncedThenSyncFails: an unsynced record was answered, then its
// fdatasync failed: the Append of the same chunk gets the failure, the log
// is stopped for good, and a crash may take the unsynced record back; what
// was durable before stays.
func TestAppendUnsyncedThenSyncFails(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{})
	mustAppend(t, l, Record{Type: 1, Payload: []byte("durable")})
	entered := make(chan struct{}, 64)
	release := holdSyncs(t, fsys, entered)
	first := goAppend(l, false, "first")
	<-entered
	durable := goAppend(l, false, "send")
	un := goAppend(l, true, "fire")
	waitQueued(t, l, 2)
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	release()
	if r := waitResult(t, first, "the first Append"); r.err != nil {
		t.Fatal(r.err)
	}
	if r := waitResult(t, un, "AppendUnsynced"); r.err != nil {
		t.Fatalf("AppendUnsynced: %v (it is answered before the fdatasync)", r.err)
	}
	r := waitResult(t, durable, "Append")
	if !errors.Is(r.err, ErrFsyncFailed) {
		t.Fatalf("Append in the chunk whose fdatasync failed: %v, want ErrFsyncFailed", r.err)
	}
	fsys.Inject(nil)
	if _, err := l.Append(Record{Type: 1, Payload: []byte("later")}); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after the failed fdatasync: %v, want the sticky failure", err)
	}
	l.Close()
	_, recs := scanAll(t, openLog(t, mem.Crash(nil), Options{}))
	ps := payloads(recs)
	if len(ps) < 2 || ps[0] != "durable" || ps[1] != "first" {
		t.Fatalf("after the crash the log holds %q; the durable records must stay", ps)
	}
	for _, p := range ps {
		if p == "later" {
			t.Fatalf("a refused record is in the log: %q", ps)
		}
	}
}

// TestAppendUnsyncedConcurrent mixes both kinds of append from many
// goroutines (run it with -race): every record is in the log once, in a
// position its caller was given, and a crash keeps every one whose Append
// returned.
func TestAppendUnsyncedConcurrent(t *testing.T) {
	mem := newMem(t)
	l := openLog(t, mem, Options{})
	const writers, each = 8, 200
	var mu sync.Mutex
	got := map[Pos]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := fmt.Sprintf("w%d-%d", w, i)
				f := l.Append
				if (w+i)%2 == 0 {
					f = l.AppendUnsynced
				}
				pos, err := f(Record{Type: 1, Payload: []byte(p)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if old, dup := got[pos[0]]; dup {
					t.Errorf("position %d given to %s and %s", pos[0], old, p)
				}
				got[pos[0]] = p
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	pos, recs := scanAll(t, openLog(t, mem.Crash(nil), Options{}))
	if len(recs) != writers*each {
		t.Fatalf("%d records after the crash, want %d", len(recs), writers*each)
	}
	for i, p := range pos {
		if got[p] != string(recs[i].Payload) {
			t.Fatalf("record at %d is %q, its caller was given %q", p, recs[i].Payload, got[p])
		}
	}
}

func payloads(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Payload)
	}
	return out
}

// TestWaitDurable: WaitDurable waits for the fdatasync under way for what
// was published, starts none of its own, and reports a failure of it.
func TestWaitDurable(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{})
	if err := l.WaitDurable(); err != nil {
		t.Fatalf("WaitDurable with everything durable: %v", err)
	}
	entered := make(chan struct{}, 64)
	release := holdSyncs(t, fsys, entered)
	un := goAppend(l, true, "fire")
	<-entered
	if r := waitResult(t, un, "AppendUnsynced"); r.err != nil {
		t.Fatal(r.err)
	}
	waited := make(chan error, 1)
	go func() { waited <- l.WaitDurable() }()
	waitWaiters(t, l)
	select {
	case err := <-waited:
		t.Fatalf("WaitDurable returned (%v) while the fdatasync was held", err)
	default:
	}
	release()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitDurable did not return after the fdatasync ended")
	}
	if n := len(entered); n != 0 {
		t.Fatalf("WaitDurable made %d fdatasyncs of its own, want none", n)
	}

	// A failed fdatasync: WaitDurable reports it.
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	if _, err := l.AppendUnsynced(Record{Type: 1, Payload: []byte("lost")}); err != nil {
		t.Fatalf("AppendUnsynced: %v", err)
	}
	if err := l.WaitDurable(); !errors.Is(err, ErrFsyncFailed) {
		t.Fatalf("WaitDurable after a failed fdatasync: %v, want ErrFsyncFailed", err)
	}
	fsys.Inject(nil)
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close of the failed log: %v", err)
	}
}

// waitWaiters waits until some goroutine waits in WaitDurable: the durable
// channel it took is still the current one and the head is past durable.
func waitWaiters(t *testing.T, l *Log) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		behind := l.mu.durable < l.mu.head
		l.mu.Unlock()
		if behind {
			// The waiter may not be parked yet; give it a moment to be: a
			// WaitDurable that returned early is caught by the check
			// after, whichever happens first.
			time.Sleep(10 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the head never got past the durable position")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWaitDurableAsync: under FlushAsync WaitDurable neither waits for nor
// asks for an fdatasync.
func TestWaitDurableAsync(t *testing.T) {
	fsys := vfs.NewFaulty(newMem(t))
	l := openLog(t, fsys, Options{Flush: FlushAsync, FlushInterval: time.Hour})
	entered := make(chan struct{}, 64)
	release := holdSyncs(t, fsys, entered)
	if _, err := l.AppendUnsynced(Record{Type: 1, Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(); err != nil {
		t.Fatal(err)
	}
	if n := len(entered); n != 0 {
		t.Fatalf("WaitDurable under FlushAsync made %d fdatasyncs", n)
	}
	release()
}
