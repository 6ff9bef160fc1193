package remoting

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
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

// TestBufferedFrameStartCutOff: a frame whose first bytes came in the
// same read as the frame before it has begun, so the read timeout, not
// the idle timeout, bounds the rest: a client that sends a whole request
// and the start of another in one write, then stalls, gets the answer to
// the first and is cut off with a log line after the read timeout.
func TestBufferedFrameStartCutOff(t *testing.T) {
	b, logs := startLogged(t, func(o *Options) {
		o.ReadTimeout = 300 * time.Millisecond
		o.IdleTimeout = time.Hour
	})
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	first, err := (&Command{Code: codeGetBrokerClusterInfo, Opaque: 1}).encode()
	if err != nil {
		t.Fatal(err)
	}
	nc.Write(append(first, 0, 0, 1, 0, 0)) // then a 256-byte frame, one byte of it
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf, err := readFrame(nc, testLimits)
	if err != nil {
		t.Fatalf("no answer to the whole request: %v", err)
	}
	if resp, err := decodeFrame(buf, testLimits); err != nil || resp.Opaque != 1 || resp.Code != respSuccess {
		t.Fatalf("answer %+v, %v", resp, err)
	}
	start := time.Now()
	if _, err := io.ReadAll(nc); err != nil {
		t.Fatalf("not disconnected: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("disconnected after %v", d)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "too slow"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line:\n%s", logs)
		}
	}
}

// TestFrameWriterTakesWokenFrames: writers made runnable together (the
// answers to one group commit's sends) go out in one write, because the
// first yields before it takes the queue. On one P the others can only
// queue while it yields; without the yield each wrote alone (16 writes).
func TestFrameWriterTakesWokenFrames(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	g := &gateConn{open: make(chan struct{}), first: make(chan struct{})}
	close(g.open)
	w := newFrameWriter(g)
	const n = 16
	frame := func(i int) []byte { return []byte(fmt.Sprintf("<frame %02d>", i)) }
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = w.write(frame(i))
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	// The scheduler looks at its global queue first on one pick in 61,
	// which can run the yielding writer before the last few queue.
	if w.rounds > 2 {
		t.Fatalf("%d frames woken together took %d writes, want at most 2", n, w.rounds)
	}
	out := g.out.String()
	for i := 0; i < n; i++ {
		if c := strings.Count(out, string(frame(i))); c != 1 {
			t.Fatalf("frame %d written %d times in %q", i, c, out)
		}
	}
}
