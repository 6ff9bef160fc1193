package kafkamode

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/vfs"
)

// spillRig is a worker with a spill on an in-memory filesystem, no Kafka,
// and a fake clock that the test advances; it drives the loop's index
// steps (indexRecord, loadSpilled, collectDue) by hand.
type spillRig struct {
	t   *testing.T
	w   *Worker
	clk *clock.Fake
	fs  vfs.FS
}

func newSpillRig(t *testing.T, fs vfs.FS) *spillRig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.SpillDir, cfg.SpillFS = "spill", fs
	w, err := New(cfg) // NearWindow 2 min, BodyLead 3 s: the defaults
	if err != nil {
		t.Fatal(err)
	}
	cleanup, err := w.openSpill()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return &spillRig{t: t, w: w, clk: clock.NewFake(time.UnixMilli(1_800_000_000_000)), fs: fs}
}

func (r *spillRig) now() int64 { return r.clk.Now().UnixMilli() }

func (r *spillRig) part(p int32) *partProgress {
	pp := newPartProgress(p, nil)
	r.w.parts.parts[p] = pp
	return pp
}

// schedule indexes a message of partition p at offset o, due in dueIn.
func (r *spillRig) schedule(p int32, o int64, key string, dueIn time.Duration) int64 {
	due := r.now() + dueIn.Milliseconds()
	rc := rec(HeaderDeliverAt, strconv.FormatInt(due, 10), HeaderBizTopic, "orders")
	rc.Topic, rc.Partition, rc.Offset, rc.Key = r.w.cfg.DelayTopic, p, o, []byte(key)
	rc.Timestamp = r.clk.Now()
	r.index(rc)
	return due
}

func (r *spillRig) index(rc *kgo.Record) {
	r.w.indexOne(rc, r.now(), r.w.cfg.BodyLead.Milliseconds())
	r.w.idx.flushSpill()
}

// inRAM returns the live entries of the due heap by offset.
func (r *spillRig) inRAM(pp *partProgress) map[int64]*entry {
	out := map[int64]*entry{}
	for _, e := range r.w.idx.due {
		if e.pp == pp && e.live() {
			out[e.offset] = e
		}
	}
	return out
}

// TestSpillReloadsBeforeDueNeverEarly: an entry due beyond the near window
// is written to disk, not kept in RAM; it comes back when its bucket
// enters the window, not before, and at least the window minus a bucket
// before its due time (so its body is fetched in time); the forecast and
// the snapshot count it while it is on disk.
func TestSpillReloadsBeforeDueNeverEarly(t *testing.T) {
	r := newSpillRig(t, vfs.NewMem())
	pp := r.part(0)
	r.schedule(0, 0, "a", 30*time.Second)        // within the window: RAM
	far := r.schedule(0, 1, "b", 10*time.Minute) // spilled
	days := r.schedule(0, 2, "c", 48*time.Hour)  // spilled
	if got := r.inRAM(pp); len(got) != 1 || got[0] == nil {
		t.Fatalf("in RAM: %v, want offset 0 only", got)
	}
	if n := r.w.stats.Spilled.Load(); n != 2 {
		t.Fatalf("spilled %d, want 2", n)
	}

	plan, err := forecast.NewPlan(r.now(), days+1000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	buckets := plan.Run(forecast.New())
	if n := r.w.idx.spilledForecast(plan, buckets); n != 2 {
		t.Fatalf("spilled forecast counts %d, want 2", n)
	}
	snaps := r.w.buildSnapshots([]*partProgress{pp}, nil)
	if len(snaps) != 1 {
		t.Fatalf("no snapshot of a partition with spilled entries")
	}
	_, es, err := decodeSnapChunk(snaps[0].records[0].Value)
	if err != nil || len(es) != 3 || es[1].due != far || es[2].due != days {
		t.Fatalf("snapshot entries %+v (%v), want the 3 pending, spilled ones included", es, err)
	}

	near, lead := r.w.cfg.NearWindow.Milliseconds(), r.w.cfg.BodyLead.Milliseconds()
	for step := 0; far-r.now() > 0; step++ {
		r.w.idx.loadSpilled(r.now())
		_, loaded := r.inRAM(pp)[1]
		left := far - r.now()
		if !loaded && left <= near {
			t.Fatalf("%d ms before due, within the near window, still on disk", left)
		}
		if loaded && left > near+r.w.idx.spill.width {
			t.Fatalf("loaded %d ms before due, earlier than its bucket entered the window", left)
		}
		if loaded {
			if left <= lead {
				t.Fatalf("loaded only %d ms before due (body lead %d)", left, lead)
			}
			break
		}
		r.clk.Advance(5 * time.Second)
	}
	if _, ok := r.inRAM(pp)[2]; ok {
		t.Fatal("the entry due in two days came back with the near one")
	}
	if r.w.stats.Spilled.Load() != 1 || r.w.stats.SpillLoaded.Load() != 1 {
		t.Fatalf("spilled %d loaded %d, want 1 and 1", r.w.stats.Spilled.Load(), r.w.stats.SpillLoaded.Load())
	}
}

// TestSpillCancelByKey: a cancel by key finds a message that is on disk,
// cancels it in the cancel's transaction, and the message does not come
// back when its bucket loads.
func TestSpillCancelByKey(t *testing.T) {
	r := newSpillRig(t, vfs.NewMem())
	pp := r.part(0)
	due := r.schedule(0, 0, "order-1", time.Hour)
	r.schedule(0, 1, "order-2", time.Hour)
	cancel := rec(HeaderCancel, "key")
	cancel.Topic, cancel.Partition, cancel.Offset, cancel.Key = r.w.cfg.DelayTopic, 0, 2, []byte("order-1")
	r.index(cancel)

	batch := r.w.idx.collectDue(r.now())
	var cancelled []int64
	for _, e := range batch {
		if e.cancelled {
			cancelled = append(cancelled, e.offset)
		}
	}
	if len(batch) != 2 || len(cancelled) != 1 || cancelled[0] != 0 {
		t.Fatalf("batch of %d, cancelled %v: want the cancel and offset 0", len(batch), cancelled)
	}
	r.w.committed(batch, nil, nil, r.now())
	if n := r.w.stats.Spilled.Load(); n != 1 {
		t.Fatalf("spilled %d after the cancel, want 1", n)
	}
	// The cancelled entry, resolved while in the heaps, is dropped from
	// them when the loop compacts (not left until its due time).
	if r.w.idx.deadSlots != 1 {
		t.Fatalf("dead slots %d after the cancel, want 1", r.w.idx.deadSlots)
	}
	r.w.idx.dropDeadSlots()
	for _, h := range []dueHeap{r.w.idx.due, r.w.idx.noBody} {
		for _, e := range h {
			if !e.live() {
				t.Fatalf("a resolved entry (offset %d) is still in a heap after compaction", e.offset)
			}
		}
	}
	r.clk.Advance(time.Duration(due-r.now()) * time.Millisecond)
	r.w.idx.loadSpilled(r.now())
	got := r.inRAM(pp)
	if _, back := got[0]; back || got[1] == nil {
		t.Fatalf("after the load, live in RAM: %v; want offset 1 only", got)
	}
	if n := len(r.w.idx.spill.parts[pp].removed); n != 0 {
		t.Fatalf("%d offsets still remembered as removed after their file was taken", n)
	}
}

// TestSpillRevokedPartitionDropsFiles: a revoked partition's spill files
// are removed by the loop, and its entries never come back.
func TestSpillRevokedPartitionDropsFiles(t *testing.T) {
	fs := vfs.NewMem()
	r := newSpillRig(t, fs)
	p0, p1 := r.part(0), r.part(1)
	r.schedule(0, 0, "a", time.Hour)
	r.schedule(1, 0, "b", time.Hour)
	dir := r.w.idx.spill.parts[p1].dir
	if names, err := fs.List(dir); err != nil || len(names) != 1 {
		t.Fatalf("partition 1's files: %v %v", names, err)
	}
	r.w.onRevoked(nil, nil, map[string][]int32{r.w.cfg.DelayTopic: {1}})
	r.w.idx.loadSpilled(r.now())
	if names, _ := fs.List(dir); len(names) != 0 {
		t.Fatalf("revoked partition's files still there: %v", names)
	}
	if n := r.w.stats.Spilled.Load(); n != 1 {
		t.Fatalf("spilled %d, want partition 0's 1", n)
	}
	r.clk.Advance(time.Hour)
	r.w.idx.loadSpilled(r.now())
	if len(r.inRAM(p0)) != 1 || len(r.inRAM(p1)) != 0 {
		t.Fatalf("after the load: partition 0 %v, partition 1 %v", r.inRAM(p0), r.inRAM(p1))
	}
}

// TestSpillWriteErrorKeepsEntryInRAM: a failed spill write loses nothing:
// the entry stays in RAM and the error is counted.
func TestSpillWriteErrorKeepsEntryInRAM(t *testing.T) {
	fs := vfs.NewFaulty(vfs.NewMem())
	r := newSpillRig(t, fs)
	pp := r.part(0)
	fs.FailAfter(vfs.OpWrite, 0, syscall.ENOSPC)
	r.schedule(0, 0, "a", time.Hour)
	if _, ok := r.inRAM(pp)[0]; !ok {
		t.Fatal("an entry the spill could not write is not in RAM")
	}
	if r.w.stats.SpillErrors.Load() != 1 || r.w.stats.Spilled.Load() != 0 {
		t.Fatalf("spill errors %d, spilled %d; want 1 and 0", r.w.stats.SpillErrors.Load(), r.w.stats.Spilled.Load())
	}
}

// TestSpillReadErrorEndsSession: a spill file that no longer reads back
// (the disk lost it) ends the session, which rebuilds from Kafka, rather
// than dropping the entries.
func TestSpillReadErrorEndsSession(t *testing.T) {
	fs := vfs.NewFaulty(vfs.NewMem())
	r := newSpillRig(t, fs)
	r.part(0)
	r.schedule(0, 0, "a", time.Hour)
	fs.Inject(func(op vfs.Op, _ string) error {
		if op == vfs.OpRead || op == vfs.OpOpen {
			return syscall.EIO
		}
		return nil
	})
	r.clk.Advance(time.Hour)
	r.w.idx.loadSpilled(r.now())
	if r.w.idx.spillErr == nil || !errors.Is(r.w.idx.spillErr, syscall.EIO) {
		t.Fatalf("spillErr %v, want the read error", r.w.idx.spillErr)
	}
}

// TestSpillDirNotWritable: a spill directory that cannot take a file is
// refused at start with an error naming it.
func TestSpillDirNotWritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Brokers, cfg.SpillDir = []string{"127.0.0.1:1"}, file
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.openSpill()
	if err == nil || !strings.Contains(err.Error(), "not writable") || !strings.Contains(err.Error(), file) {
		t.Fatalf("openSpill under a file: %v", err)
	}
	cfg.NearWindow = time.Second
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "near window") {
		t.Fatalf("a near window shorter than the body lead: %v", err)
	}
}

// TestSpillFileChecksum: a flipped bit in a spill entry is caught.
func TestSpillFileChecksum(t *testing.T) {
	b := []byte(spillMagic)
	want := snapEntry{offset: 7, due: 1_800_000_000_000, ts: 5, keyHash: 9, back: 6}
	b = appendSpillEntry(b, want)
	if es, err := decodeSpill(b); err != nil || len(es) != 1 || es[0] != want {
		t.Fatalf("decode: %+v %v, want %+v", es, err, want)
	}
	for _, at := range []int{3, 33} { // the offset; the back
		c := bytes.Clone(b)
		c[len(spillMagic)+at] ^= 1
		if _, err := decodeSpill(c); !errors.Is(err, errSpillCorrupt) {
			t.Fatalf("flipped bit at entry byte %d: %v", at, err)
		}
	}
	// A back that would put the first offset before 0 is refused even
	// with a valid checksum.
	for _, bad := range []snapEntry{{offset: 4, back: 9}, {offset: 4, back: -5}, {offset: -1}} {
		if _, err := decodeSpill(appendSpillEntry([]byte(spillMagic), bad)); !errors.Is(err, errSpillCorrupt) {
			t.Fatalf("entry %+v: %v, want refused", bad, err)
		}
	}
}

// TestSpillDirName: workers whose IDs differ only in characters a
// directory name does not take get directories of their own; a plain ID
// is used as it is.
func TestSpillDirName(t *testing.T) {
	if got := spillDirName("hourglass", "pod-7.a_b"); got != "hourglass-pod-7.a_b" {
		t.Errorf("plain ID: %q", got)
	}
	seen := map[string]string{}
	for _, id := range []string{"w 1", "w_1", "w/1", "w:1", "wö1", "w..1"} {
		d := spillDirName("g", id)
		if strings.ContainsAny(d, " /:\\") || d == "." || d == ".." {
			t.Errorf("%q: directory name %q", id, d)
		}
		if other, dup := seen[d]; dup {
			t.Errorf("%q and %q share the spill directory %q", id, other, d)
		}
		seen[d] = id
	}
}
