package commitlog

import (
	"bytes"
	"path"
	"testing"
)

// TestPreallocStaleRequestSparesTheTakenFile: a request read after the
// writer took the spare, but before the writer renamed it into the log,
// must not create the next spare: SpareName is still the taken file's
// path, and creating a file there truncated and zeroed the segment the
// writer was making (records read back as zeros, or a later roll wrote its
// header into a sealed segment). step is the goroutine's work for one
// request, called here in the order that was a race.
func TestPreallocStaleRequestSparesTheTakenFile(t *testing.T) {
	fsys := newMem(t)
	if err := fsys.MkdirAll(testDir); err != nil {
		t.Fatal(err)
	}
	p := &preallocator{fs: fsys, dir: testDir, size: HeaderSize + 4096,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if p.step() || !p.ready() {
		t.Fatal("no spare after the first request")
	}
	f := p.take()
	marker := []byte("the writer's header and records")
	if _, err := f.WriteAt(marker, 0); err != nil {
		t.Fatal(err)
	}

	// The stale request: the taken spare is still at SpareName.
	if p.step() {
		t.Fatal("step reported a stop")
	}
	if p.ready() {
		t.Fatal("a new spare was made while the taken one was still at SpareName")
	}
	got := make([]byte, len(marker))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, marker) {
		t.Fatalf("the taken spare holds %q (%v), want %q", got, err, marker)
	}

	// Renamed into the log, as install does; then the next spare is made.
	seg := path.Join(testDir, segmentName(0))
	if err := fsys.Rename(path.Join(testDir, SpareName), seg); err != nil {
		t.Fatal(err)
	}
	p.release()
	if p.step() || !p.ready() {
		t.Fatal("no spare after the taken one was released")
	}
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, marker) {
		t.Fatalf("after the next spare the segment holds %q (%v), want %q", got, err, marker)
	}
	if n := p.take(); n == nil || n == f {
		t.Fatal("the next spare is not a new file")
	} else {
		_ = n.Close()
	}
	_ = f.Close()
}
