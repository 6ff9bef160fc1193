package commitlog

import (
	"fmt"
	"sync"
	"testing"
)

// TestAppendUnsyncedAcrossRolls mixes both kinds of append and
// WaitDurable from many goroutines over segments that roll every few
// records (run it with -race: the writer must not touch an answered
// request, which its caller puts back in the pool at once). Every
// position is given once; a WaitDurable after an AppendUnsynced returns
// only once that record is covered by an fdatasync, also when a roll
// came between; and a crash keeps every record in its position.
func TestAppendUnsyncedAcrossRolls(t *testing.T) {
	mem := newMem(t)
	l := openLog(t, mem, Options{SegmentBytes: 256})
	const writers, each = 6, 120
	var mu sync.Mutex
	got := map[Pos]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := fmt.Sprintf("w%d-%d-%s", w, i, "padding-padding-padding"[:i%24])
				f := l.Append
				if (w+i)%3 != 0 {
					f = l.AppendUnsynced
				}
				pos, err := f(Record{Type: 1, Payload: []byte(p)})
				if err != nil {
					t.Error(err)
					return
				}
				if i%4 == 0 {
					if err := l.WaitDurable(); err != nil {
						t.Error(err)
						return
					}
					l.mu.Lock()
					durable := l.mu.durable
					l.mu.Unlock()
					if durable <= pos[0] {
						t.Errorf("WaitDurable returned with the log durable to %d, before the record at %d", durable, pos[0])
					}
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
	if err := l.WaitDurable(); err != nil {
		t.Fatal(err)
	}
	if segs := l.Segments(); len(segs) < 10 {
		t.Fatalf("%d segments: the test meant many rolls", len(segs))
	}
	pos, recs := scanAll(t, openLog(t, mem.Crash(nil), Options{SegmentBytes: 256}))
	if len(recs) != writers*each {
		t.Fatalf("%d records after the crash, want %d", len(recs), writers*each)
	}
	for i, p := range pos {
		if got[p] != string(recs[i].Payload) {
			t.Fatalf("record at %d is %q, its caller was given %q", p, recs[i].Payload, got[p])
		}
	}
}
