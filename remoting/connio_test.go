package remoting

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// gateConn is a net.Conn whose first Write waits for open; it records
// what is written, or fails every Write with fail.
type gateConn struct {
	net.Conn
	open  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	out   bytes.Buffer
	fail  error
	first chan struct{} // closed when the first Write begins
}

func (g *gateConn) Write(b []byte) (int, error) {
	g.once.Do(func() { close(g.first); <-g.open })
	if g.fail != nil {
		return 0, g.fail
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.Write(b)
}

func (g *gateConn) SetWriteDeadline(time.Time) error { return nil }

// TestFrameWriterCoalesces: frames queued while a write is under way go
// out together in the next write, whole and each once, and every writer
// returns only after its frame is written.
func TestFrameWriterCoalesces(t *testing.T) {
	g := &gateConn{open: make(chan struct{}), first: make(chan struct{})}
	w := newFrameWriter(g)
	const n = 16
	frame := func(i int) []byte { return []byte(fmt.Sprintf("<frame %02d>", i)) }
	errc := make(chan error, n)
	go func() { errc <- w.write(frame(0)) }()
	<-g.first
	for i := 1; i < n; i++ {
		go func() { errc <- w.write(frame(i)) }()
	}
	for { // wait until all are queued behind the blocked write
		w.mu.Lock()
		q := w.queued
		w.mu.Unlock()
		if q == n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-errc:
		t.Fatalf("a writer returned (%v) before its frame was written", err)
	default:
	}
	close(g.open)
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if w.rounds != 2 {
		t.Fatalf("%d frames took %d writes, want 2 (the blocked one, then the rest together)", n, w.rounds)
	}
	out := g.out.String()
	for i := 0; i < n; i++ {
		if c := bytes.Count([]byte(out), frame(i)); c != 1 {
			t.Fatalf("frame %d written %d times in %q", i, c, out)
		}
	}
	if len(out) != n*len(frame(0)) {
		t.Fatalf("wrote %d bytes, want %d", len(out), n*len(frame(0)))
	}
}

// TestFrameWriterFailure: a failed write fails its batch's writers and
// every later one.
func TestFrameWriterFailure(t *testing.T) {
	boom := errors.New("boom")
	g := &gateConn{open: make(chan struct{}), first: make(chan struct{}), fail: boom}
	close(g.open)
	w := newFrameWriter(g)
	if err := w.write([]byte("a")); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
	if err := w.write([]byte("b")); !errors.Is(err, boom) {
		t.Fatalf("a write after the failure got %v, want %v", err, boom)
	}
}
