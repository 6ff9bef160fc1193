package engine

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// readGateFS passes everything to a vfs.FS, except that once armed it holds
// the next ReadAt of the file name until released: the dispatch loop's
// read of one timer bucket then stays in flight while the test looks.
type readGateFS struct {
	vfs.FS
	name             string
	mu               sync.Mutex
	armed            bool
	reached, release chan struct{}
}

func (g *readGateFS) arm(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.name, g.armed = name, true
	g.reached, g.release = make(chan struct{}), make(chan struct{})
}

func (g *readGateFS) Open(name string) (vfs.File, error) {
	f, err := g.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &readGateFile{File: f, g: g, name: name}, nil
}

type readGateFile struct {
	vfs.File
	g    *readGateFS
	name string
}

func (f *readGateFile) ReadAt(p []byte, off int64) (int, error) {
	g := f.g
	g.mu.Lock()
	hold := g.armed && strings.HasSuffix(f.name, g.name)
	var reached, release chan struct{}
	if hold {
		g.armed = false
		reached, release = g.reached, g.release
	}
	g.mu.Unlock()
	if hold {
		close(reached)
		<-release
	}
	return f.File.ReadAt(p, off)
}

// TestWheelWaitsForUnloadedBuckets: when the clock jumps over several
// timer buckets, the wheel must not pass a bucket that is not loaded yet.
// The loop loads one bucket per turn; if it advanced the wheel to now as
// soon as the first load ended, the fire frontier would run ahead of the
// timers of the next bucket while it loads, and a checkpoint taken then
// would make recovery skip them as already visible: lost messages.
func TestWheelWaitsForUnloadedBuckets(t *testing.T) {
	mem := vfs.NewMem()
	gate := &readGateFS{FS: mem}
	clk := clock.NewFake(t0)
	opts := Options{Dir: "data", FS: gate, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: 1000 * time.Hour, BucketWidth: time.Second}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	start := t0.UnixMilli()
	send := func(at int64) message.ID {
		rc, err := e.Send(context.Background(), message.Message{Topic: "gap", Body: []byte("x")}, message.When{At: at})
		if err != nil {
			t.Fatal(err)
		}
		return rc.ID
	}
	send(start + 10_200)
	late := send(start + 11_200) // in the next bucket
	// Write the buckets, so that loading them reads their files.
	if err := e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	gate.arm("/" + strconv.FormatInt(e.disp.timers.BucketOf(start+11_200), 10) + ".tb")
	waitParked(e, clk)
	clk.Advance(12 * time.Second)
	select {
	case <-gate.reached:
	case <-time.After(5 * time.Second):
		t.Fatalf("the loop never read the second bucket: %s", engineState(e))
	}
	e.mu.Lock()
	f := e.frontierLocked()
	e.mu.Unlock()
	if f >= start+11_200 {
		t.Errorf("frontier %d passed the unloaded message due %d: %s", f, start+11_200, engineState(e))
	}
	// A checkpoint now, and a power loss right after it.
	if err := e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	img := mem.Crash(nil)
	close(gate.release)
	opts.FS = img
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	now := clk.Now().UnixMilli()
	if !waitSettled(r, now, 5*time.Second) {
		t.Fatalf("recovered engine did not settle: %s", engineState(r))
	}
	r.mu.Lock()
	visible := int64(0)
	for _, q := range r.cat.topicsByName["gap"].queues {
		visible += int64(q.Len())
	}
	r.mu.Unlock()
	if visible != 2 {
		info, _ := r.Inspect(late)
		t.Errorf("%d of 2 due messages visible after recovery; the later one is %v: %s", visible, info.State, engineState(r))
	}
}
