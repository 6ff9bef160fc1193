package commitlog

import (
	"bytes"
	"path"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// syncStats collects OnSync calls.
type syncStats struct {
	mu                    sync.Mutex
	syncs, records, bytes int
	maxRecords            int
}

func (s *syncStats) hook(_ time.Duration, records, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncs++
	s.records += records
	s.bytes += bytes
	s.maxRecords = max(s.maxRecords, records)
}

func (s *syncStats) get() (syncs, records, bytes, maxRecords int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncs, s.records, s.bytes, s.maxRecords
}

// TestGroupCommit: 64 producers share fdatasyncs. Mem syncs instantly, so
// the test makes each sync last until every producer that is not waiting on
// it has queued its next Append, as a real disk's sync outlasts an append;
// it then checks that batches formed and that OnSync accounted for every
// record.
func TestGroupCommit(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	var stats syncStats
	l := openLog(t, fsys, Options{OnSync: stats.hook})
	const producers, each = 64, 25
	var finished atomic.Int32
	queued := func() int {
		l.q.mu.Lock()
		defer l.q.mu.Unlock()
		return len(l.q.reqs)
	}
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && path.Base(name) != SpareName {
			// The hook runs on the writer goroutine, which owns l.w (the
			// spare's syncs run on the preallocator's, and are left): its
			// data requests are the producers waiting on this sync.
			for queued()+len(l.w.data) < producers-int(finished.Load()) {
				runtime.Gosched()
			}
		}
		return nil
	})
	var mu sync.Mutex
	acked := map[Pos][]byte{}
	var wg sync.WaitGroup
	for w := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer finished.Add(1)
			for seq := range each {
				p := testPayload(w, seq, 16)
				pos, err := l.Append(Record{Type: 1, Payload: p})
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				if _, dup := acked[pos[0]]; dup {
					t.Errorf("position %d handed out twice", pos[0])
				}
				acked[pos[0]] = p
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fsys.Inject(nil)
	syncs, records, nbytes, maxRecords := stats.get()
	const appends = producers * each
	t.Logf("%d appends, %d fdatasyncs, largest batch %d records", appends, syncs, maxRecords)
	if records != appends || nbytes != appends*frameSize(24) {
		t.Fatalf("OnSync accounted %d records and %d bytes, want %d and %d", records, nbytes, appends, appends*frameSize(24))
	}
	if syncs > appends/8 || maxRecords < producers/2 {
		t.Fatalf("%d fdatasyncs for %d appends, largest batch %d: no group commit", syncs, appends, maxRecords)
	}
	checkExactly(t, l, acked)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkExactly(t, openLog(t, mem.Crash(nil), Options{}), acked)
}

// TestAsyncFlush: under FlushAsync an Append returns before its record is
// durable; Sync, the ticker and Close make it durable.
func TestAsyncFlush(t *testing.T) {
	mem := newMem(t)
	var stats syncStats
	l := openLog(t, mem, Options{Flush: FlushAsync, FlushInterval: time.Hour, OnSync: stats.hook})
	var pos []Pos
	for i := range 10 {
		pos = append(pos, mustAppend(t, l, Record{Type: 1, Payload: testPayload(0, i, 5)})...)
	}
	// Readable at once, but not durable: the hour-long interval has not
	// passed.
	if rec, _, err := l.Read(pos[9]); err != nil || !bytes.Equal(rec.Payload, testPayload(0, 9, 5)) {
		t.Fatalf("Read of an async record: %v", err)
	}
	if syncs, _, _, _ := stats.get(); syncs != 0 {
		t.Fatalf("%d syncs before the interval", syncs)
	}
	crashed := openLog(t, mem.Crash(nil), Options{})
	if crashed.Head() != 0 {
		t.Fatalf("unsynced async records survived a crash: Head %d", crashed.Head())
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if syncs, records, _, _ := stats.get(); syncs != 1 || records != 10 {
		t.Fatalf("after Sync: %d syncs of %d records", syncs, records)
	}
	if got := openLog(t, mem.Crash(nil), Options{}).Head(); got != l.Head() {
		t.Fatalf("after Sync a crash keeps Head %d, want %d", got, l.Head())
	}

	// Close syncs what is left.
	mustAppend(t, l, Record{Type: 1, Payload: []byte("tail")})
	head := l.Head()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openLog(t, mem.Crash(nil), Options{}).Head(); got != head {
		t.Fatalf("after Close a crash keeps Head %d, want %d", got, head)
	}
}

// TestAsyncTicker: the background sync runs without any Sync call.
func TestAsyncTicker(t *testing.T) {
	mem := newMem(t)
	synced := make(chan int, 100)
	l := openLog(t, mem, Options{Flush: FlushAsync, FlushInterval: time.Millisecond,
		OnSync: func(_ time.Duration, records, _ int) { synced <- records }})
	mustAppend(t, l, Record{Type: 1, Payload: []byte("a")}, Record{Type: 2, Payload: []byte("b")})
	select {
	case n := <-synced:
		if n != 2 {
			t.Fatalf("background sync covered %d records, want 2", n)
		}
	case <-time.After(time.Minute): // a bound against hanging, not a timing assertion
		t.Fatal("no background sync within a minute")
	}
	if got := openLog(t, mem.Crash(nil), Options{}).Head(); got != l.Head() {
		t.Fatalf("after the background sync a crash keeps Head %d, want %d", got, l.Head())
	}
}
