package remoting

import (
	"sync"
	"testing"
	"time"
)

func (w *workers) idleCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idle)
}

// waitUntil polls cond until it holds or a deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWorkersReuseAndGrow: a worker that finished waits idle and takes
// the next function; functions that block do not hold up others (a new
// worker starts for each while none is idle); closing ends the idle ones.
func TestWorkersReuseAndGrow(t *testing.T) {
	done := make(chan struct{})
	w := &workers{done: done}
	ran := make(chan int, 1)
	w.run(func() { ran <- 1 })
	<-ran
	waitUntil(t, "the worker is idle", func() bool { return w.idleCount() == 1 })
	w.run(func() { ran <- 2 })
	if got := <-ran; got != 2 {
		t.Fatalf("ran %d", got)
	}
	waitUntil(t, "the worker is idle again", func() bool { return w.idleCount() == 1 })

	// Ten functions that block until released all start: the one idle
	// worker takes one, nine new ones the rest.
	const n = 10
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		w.run(func() { started.Done(); <-release })
	}
	started.Wait()
	if got := w.idleCount(); got != 0 {
		t.Fatalf("%d idle while all are busy", got)
	}
	close(release)
	waitUntil(t, "all ten are idle", func() bool { return w.idleCount() == n })

	close(done)
	waitUntil(t, "the idle workers left at close", func() bool { return w.idleCount() == 0 })
	w.run(func() { ran <- 3 }) // after close, still run (a connection may still be read)
	if got := <-ran; got != 3 {
		t.Fatalf("ran %d", got)
	}
	waitUntil(t, "the worker of a closed server left", func() bool { return w.idleCount() == 0 })
}

// TestWorkersIdleBound: no more than maxIdleWorkers stay idle.
func TestWorkersIdleBound(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	w := &workers{done: done}
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	n := maxIdleWorkers + 20
	started.Add(n)
	finished.Add(n)
	for range n {
		w.run(func() { started.Done(); <-release; finished.Done() })
	}
	started.Wait()
	close(release)
	finished.Wait()
	waitUntil(t, "the bound is reached", func() bool { return w.idleCount() == maxIdleWorkers })
}

// TestWorkersConcurrent: many callers at once, each function runs once
// (run under -race).
func TestWorkersConcurrent(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	w := &workers{done: done}
	var mu sync.Mutex
	seen := map[int]int{}
	var all sync.WaitGroup
	for c := range 8 {
		all.Add(500)
		go func() {
			for i := range 500 {
				id := c*1000 + i
				w.run(func() {
					mu.Lock()
					seen[id]++
					mu.Unlock()
					all.Done()
				})
			}
		}()
	}
	all.Wait()
	if len(seen) != 4000 {
		t.Fatalf("%d distinct functions ran, want 4000", len(seen))
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("function %d ran %d times", id, k)
		}
	}
}

// TestServerCloseEndsWorkers: the workers that served a broker's requests
// have all left when its Close returns.
func TestServerCloseEndsWorkers(t *testing.T) {
	b := startTest(t, nil)
	for i := range 3 {
		if resp := b.request(t, &Command{Code: codeSendMessage, Opaque: int32(i + 1), Body: []byte("x"),
			ExtFields: map[string]string{"topic": "orders", "queueId": "0"}}); resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	w := &b.srv.workers
	waitUntil(t, "a worker is idle", func() bool { return w.idleCount() > 0 })
	b.close(t)
	if n := w.idleCount(); n != 0 {
		t.Fatalf("%d workers idle after Close returned", n)
	}
}
