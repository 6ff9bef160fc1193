package timewheel

import "testing"

// checkInvariants walks the whole wheel and checks the structural
// invariants the code relies on.
func checkInvariants(t testing.TB, w *Wheel[int]) {
	t.Helper()
	if w.advancing {
		t.Fatal("advancing set outside Advance")
	}
	if !w.pending && w.cascade != nil && w.cascade.head != nil {
		t.Fatal("cascade bucket holds timers after a chain ended")
	}
	if w.fence != nil && w.fence.bucket != w.ready {
		t.Fatalf("fence timer %d is not in the ready list", w.fence.Value)
	}
	if c := clockTick(w.now, w.tick); uint64(c)-uint64(w.origin) != w.cur {
		t.Fatalf("cur %d does not match now %d", w.cur, w.now)
	}
	count := walk(t, w.ready, func(tm *Timer[int]) {
		if tm.deadline > w.now && tm.expiry > w.cur {
			t.Fatalf("ready timer %d not due: deadline %d now %d", tm.Value, tm.deadline, w.now)
		}
	})
	for i := range w.levels {
		lv := &w.levels[i]
		if lv.cur != w.cur/lv.unit {
			t.Fatalf("level %d cur %d, want %d", i, lv.cur, w.cur/lv.unit)
		}
		for j := range lv.buckets {
			b := &lv.buckets[j]
			if b.index >= 0 && w.queue[b.index] != b {
				t.Fatalf("level %d bucket %d: queue index %d wrong", i, j, b.index)
			}
			if b.head == nil {
				continue
			}
			if b == w.cascade {
				// Popped, with the clock at its start: what is left is
				// due now or moves down.
				if b.index >= 0 || b.exp != w.cur {
					t.Fatalf("cascade bucket at level %d: index %d exp %d cur %d", i, b.index, b.exp, w.cur)
				}
				count += walk(t, b, func(tm *Timer[int]) {
					if tm.expiry/lv.unit != b.exp/lv.unit {
						t.Fatalf("timer %d expiry %d in cascade bucket %d", tm.Value, tm.expiry, b.exp)
					}
				})
				continue
			}
			if b.index < 0 {
				t.Fatalf("level %d bucket %d has timers but is not queued", i, j)
			}
			// Mid-chain a bucket may start at the clock's tick: one on a
			// lower level than the cascade bucket with the same start,
			// which the chain pops next.
			atClock := w.pending && b.exp == w.cur
			v := b.exp / lv.unit
			if b.exp%lv.unit != 0 || v%w.slots != uint64(j) || (v <= lv.cur && !atClock) || v-lv.cur >= w.slots {
				t.Fatalf("level %d bucket %d: exp %d out of place (cur %d)", i, j, b.exp, w.cur)
			}
			count += walk(t, b, func(tm *Timer[int]) {
				if tm.expiry/lv.unit != v {
					t.Fatalf("timer %d expiry %d in bucket %d of level %d", tm.Value, tm.expiry, b.exp, i)
				}
			})
		}
	}
	if count != w.n {
		t.Fatalf("wheel holds %d timers, n = %d", count, w.n)
	}
	for i, b := range w.queue {
		if b.index != i {
			t.Fatalf("queue[%d].index = %d", i, b.index)
		}
		if i > 0 && w.queue[(i-1)/2].exp > b.exp {
			t.Fatalf("queue heap order broken at %d", i)
		}
		if b.exp < w.cur || (b.exp == w.cur && !w.pending) {
			t.Fatalf("queued bucket exp %d not after cur %d", b.exp, w.cur)
		}
	}
}

// walk checks the links of b's list and calls f for each timer.
func walk(t testing.TB, b *bucket[int], f func(*Timer[int])) int {
	t.Helper()
	n := 0
	var prev *Timer[int]
	for tm := b.head; tm != nil; tm = tm.next {
		if tm.bucket != b || tm.prev != prev {
			t.Fatalf("timer %d: broken links", tm.Value)
		}
		f(tm)
		prev = tm
		n++
	}
	if b.tail != prev {
		t.Fatal("bucket tail is not its last timer")
	}
	return n
}
