package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestConcurrentReadersAndDelete runs readers, scanners and DeleteBefore
// beside appenders; with -race it checks the locking, and every read either
// succeeds with the right record or fails with ErrOutOfRange.
func TestConcurrentReadersAndDelete(t *testing.T) {
	l := openLog(t, newMem(t), Options{SegmentBytes: 300})
	var mu sync.Mutex
	written := map[Pos][]byte{}
	var all []Pos
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range 150 {
				p := testPayload(w, seq, seq%40)
				pos := mustAppend(t, l, Record{Type: testType(seq), Payload: p})
				mu.Lock()
				written[pos[0]] = p
				all = append(all, pos[0])
				mu.Unlock()
			}
		}()
	}
	var readers sync.WaitGroup
	for r := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for {
				select {
				case <-done:
					return
				default:
				}
				mu.Lock()
				if len(all) == 0 {
					mu.Unlock()
					continue
				}
				p := all[rng.IntN(len(all))]
				want := written[p]
				mu.Unlock()
				checkReadAt(t, l, r, p, want)
			}
		}()
	}
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := l.DeleteBefore(l.Head() / 2); err != nil {
				t.Errorf("DeleteBefore: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	close(done)
	readers.Wait()
}

// checkReadAt reads position p (readers 0 and 1), which must give want, or
// scans from it (reader 2), which must give only records that parse; both
// may fail with ErrOutOfRange only (the position was deleted meanwhile).
func checkReadAt(t *testing.T, l *Log, r int, p Pos, want []byte) {
	switch r {
	case 0, 1:
		rec, _, err := l.Read(p)
		if err == nil && !bytes.Equal(rec.Payload, want) {
			t.Errorf("Read(%d) wrong payload", p)
		} else if err != nil && !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Read(%d): %v", p, err)
		}
	case 2:
		err := l.Scan(p, func(pos Pos, rec Record) error {
			if _, _, ok := parsePayload(rec.Payload); !ok {
				return fmt.Errorf("garbage at %d", pos)
			}
			return nil
		})
		if err != nil && !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Scan(%d): %v", p, err)
		}
	}
}
