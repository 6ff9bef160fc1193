package remoting

import (
	"slices"
	"sync"
	"time"
)

// workers runs request handlers on goroutines that serve one request after
// another. A goroutine started per request began with the runtime's
// smallest stack and grew it, by copying, on every request as deep as a
// send or a pull goes: 5 to 6 % of the broker's CPU under a send load
// (newstack and copystack in a profile). A worker keeps its grown stack
// between requests (until a garbage collection shrinks an idle one).
//
// A handler may block for as long as a long poll holds (MaxLongPoll), so
// workers are never a fixed pool: a request that finds none idle gets a
// new one, as before. At most maxIdleWorkers wait for work, each at most
// workerIdle, and all leave when the server closes (done); wait returns
// once they have.
type workers struct {
	done <-chan struct{}
	live sync.WaitGroup // one per worker goroutine
	mu   sync.Mutex
	idle []chan func() // last in, first out: the most recently busy stack is the warmest
}

const (
	// maxIdleWorkers bounds the goroutines kept waiting for a request:
	// a burst of long polls that ends leaves no more than these.
	maxIdleWorkers = 128
	// workerIdle is how long a worker waits for a request before it ends.
	workerIdle = 30 * time.Second
)

// run has f called on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- f // buffered: the worker is committed to receive it
		return
	}
	w.mu.Unlock()
	w.live.Add(1)
	go w.loop(f)
}

// wait returns once every worker has left: after done is closed and the
// functions running have returned.
func (w *workers) wait() { w.live.Wait() }

// loop calls f, then waits for the next function until it has waited
// workerIdle, or the server closes.
func (w *workers) loop(f func()) {
	defer w.live.Done()
	ch := make(chan func(), 1)
	var t *time.Timer
	for {
		f()
		w.mu.Lock()
		if len(w.idle) >= maxIdleWorkers {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		if t == nil {
			t = time.NewTimer(workerIdle)
		} else {
			t.Reset(workerIdle)
		}
		select {
		case f = <-ch:
			continue
		case <-t.C:
		case <-w.done:
		}
		if !w.leave(ch) {
			f = <-ch // run took this worker meanwhile: its function is on the way
			continue
		}
		return
	}
}

// leave takes ch off the idle list; false if run has taken it already.
func (w *workers) leave(ch chan func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.Index(w.idle, ch)
	if i < 0 {
		return false
	}
	w.idle = slices.Delete(w.idle, i, i+1)
	return true
}
