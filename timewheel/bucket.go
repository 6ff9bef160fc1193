package timewheel

// bucket is an intrusive doubly linked list of timers plus its place in the
// wheel's bucket queue. The list is first in, first out: push appends at the
// tail and the wheel takes timers from the head, which is what makes timers
// of one tick fire in the order they were added (see the package doc for
// the one exception).
//
// A bucket in a level covers the ticks [exp, exp+unit) of its level. While a
// bucket is in the queue its exp is fixed; it is recomputed only when the
// bucket enters the queue again, which is safe because the wheel's placement
// rule never maps two different bucket ranges of one level to the same slot
// while the earlier one is still queued (see Wheel.place).
type bucket[T any] struct {
	head, tail *Timer[T]
	wheel      *Wheel[T] // owner, to reject a Cancel on the wrong wheel
	exp        uint64    // first tick of the range, relative to Wheel.origin
	index      int       // position in Wheel.queue, or -1 when not queued
	// level is the bucket's level in the hierarchy. The queue breaks ties
	// in exp by it, higher level first: a bucket's timers then leave it
	// before those of a lower bucket with the same exp, which were added
	// later (placement only ever moves down as the clock advances), and
	// the order in which buckets pop depends on their (exp, level) alone,
	// not on the heap's history.
	level int
}

// push appends t at the tail of b; O(1).
func (b *bucket[T]) push(t *Timer[T]) {
	t.bucket = b
	t.next = nil
	t.prev = b.tail
	if b.tail != nil {
		b.tail.next = t
	} else {
		b.head = t
	}
	b.tail = t
}

// remove unlinks t, which must be in b; O(1).
func (b *bucket[T]) remove(t *Timer[T]) {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		b.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		b.tail = t.prev
	}
	t.prev, t.next, t.bucket = nil, nil, nil
}

// bucketQueue is a binary min-heap of buckets by (exp, higher level first);
// no two queued buckets share both, so the pop order is a total order. It is written out
// rather than built on container/heap to avoid the interface conversions on
// the hot path and to keep each bucket's index current for free.
type bucketQueue[T any] []*bucket[T]

func (q *bucketQueue[T]) push(b *bucket[T]) {
	b.index = len(*q)
	*q = append(*q, b)
	q.up(b.index)
}

// pop removes and returns the bucket with the smallest exp; q must not be
// empty.
func (q *bucketQueue[T]) pop() *bucket[T] {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[0].index = 0
	h[last] = nil
	*q = h[:last]
	if last > 0 {
		q.down(0)
	}
	top.index = -1
	return top
}

func (q bucketQueue[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

func (q bucketQueue[T]) down(i int) {
	n := len(q)
	for {
		left := 2*i + 1
		if left >= n {
			return
		}
		least := left
		if right := left + 1; right < n && q.less(right, left) {
			least = right
		}
		if !q.less(least, i) {
			return
		}
		q.swap(i, least)
		i = least
	}
}

// less orders buckets by exp, and buckets with the same exp (on different
// levels) higher level first.
func (q bucketQueue[T]) less(i, j int) bool {
	a, b := q[i], q[j]
	return a.exp < b.exp || a.exp == b.exp && a.level > b.level
}

func (q bucketQueue[T]) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
