package engine

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestFireVisibleBeforeItsFdatasync (invariant E21): a due message becomes
// visible once its fire record is written, while the record's fdatasync
// is still running; a power loss before that fdatasync ends takes the fire
// record back, and recovery makes the message visible again: not lost, and
// not before its due time.
func TestFireVisibleBeforeItsFdatasync(t *testing.T) {
	h := newHarness(t, nil)
	hfs := &holdSyncFS{FS: h.fs, entered: make(chan struct{}, 16), held: make(chan struct{})}
	h.e.Close()
	h.opt.FS = hfs
	h.open()
	r := h.send("t", "k", message.When{Delay: time.Second})
	waitParked(h.e, h.clk)

	// Hold every fdatasync of the commit log from now on.
	hfs.holding.Store(true)
	t.Cleanup(hfs.release) // before the harness closes the engine
	entered := hfs.entered
	h.clk.Advance(time.Second)
	<-entered // the fire record is written and its fdatasync is held
	vs := h.waitVisible("t", 1)
	if vs[0].ID != r.ID {
		t.Fatalf("visible %v, want %v", vs[0].ID, r.ID)
	}
	if vs[0].Visible < vs[0].Due {
		t.Fatalf("visible at %d before its due time %d", vs[0].Visible, vs[0].Due)
	}

	// Sync, which adapters call before they hand out a queue offset, waits
	// for the fire record's fdatasync.
	synced := make(chan error, 1)
	go func() { synced <- h.e.Sync() }()

	// Power loss now: the fire record was never durable.
	c := h.crashImage()
	c.clk = h.clk
	c.open()
	if n := len(c.visible("t")); n > 1 {
		t.Fatalf("%d visible after recovery, want at most 1", n)
	}
	vs = c.waitVisible("t", 1) // fired again at recovery
	if vs[0].ID != r.ID || vs[0].Visible < vs[0].Due {
		t.Fatalf("after the power loss: %+v, want %v visible at or after its due time", vs[0], r.ID)
	}
	select {
	case err := <-synced:
		t.Fatalf("Sync returned (%v) while the fire record's fdatasync was held", err)
	default:
	}
	hfs.release()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatalf("Sync: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sync did not return once the fdatasync ended")
	}
}

// holdSyncFS holds the fdatasyncs of commit-log segments while holding is
// set, until release; entered gets a value as each one starts to wait.
// (vfs.Faulty's hooks run one at a time, so a hook that blocked would
// block every other file operation too.)
type holdSyncFS struct {
	vfs.FS
	holding atomic.Bool
	entered chan struct{}
	held    chan struct{}
	once    sync.Once
}

func (f *holdSyncFS) release() { f.once.Do(func() { close(f.held) }) }

func (f *holdSyncFS) Create(name string) (vfs.File, error) { return f.wrap(name, f.FS.Create) }
func (f *holdSyncFS) Open(name string) (vfs.File, error)   { return f.wrap(name, f.FS.Open) }

func (f *holdSyncFS) wrap(name string, open func(string) (vfs.File, error)) (vfs.File, error) {
	file, err := open(name)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return &holdSyncFile{File: file, fs: f}, nil
}

type holdSyncFile struct {
	vfs.File
	fs *holdSyncFS
}

func (h *holdSyncFile) Sync() error {
	if h.fs.holding.Load() {
		h.fs.entered <- struct{}{}
		<-h.fs.held
	}
	return h.File.Sync()
}
