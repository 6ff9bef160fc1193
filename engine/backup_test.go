package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// sentMsg is an acknowledged send and what the restore must show of it.
type sentMsg struct {
	r     Receipt
	key   string
	state State
}

// TestBackupUnderLoadThenRestore: a backup taken while senders run holds
// every message acknowledged before it began (in its state: visible,
// pending, cancelled, rescheduled), each message acknowledged during it
// whole or not at all, none acknowledged after it returned, and nothing
// early; the restore passes the check and a broker opens it and accepts
// the old IDs.
func TestBackupUnderLoadThenRestore(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	opt := Options{Dir: filepath.Join(dir, "data"), FS: vfs.OS, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: time.Hour, SegmentBytes: 1 << 15}
	e, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	ctx := context.Background()
	before := sendBeforeBackup(t, e)
	// A checkpoint before the load, so that the backup's own checkpoint
	// has history behind it.
	if err := e.checkpoint(); err != nil {
		t.Fatal(err)
	}

	ss := startBackupSenders(t, e)
	// Let the senders get going before the backup starts.
	for {
		ss.mu.Lock()
		n := len(ss.during)
		ss.mu.Unlock()
		if n >= 200 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	bdir := filepath.Join(dir, "backup")
	info, err := e.BackupWith(ctx, bdir, nil)
	ss.mu.Lock()
	ss.returned = true
	ss.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	ss.wg.Wait()
	close(ss.stop)
	during, after := ss.during, ss.after
	t.Logf("backup: %+v; %d sends acknowledged during it, %d after", info, len(during), len(after))
	if info.LinkedFiles == 0 || info.Files == 0 || info.LogHead < info.CheckpointPos {
		t.Fatalf("backup info %+v: expected linked sealed segments and copied files", info)
	}
	if _, err := os.Stat(filepath.Join(bdir, LockFile)); !os.IsNotExist(err) {
		t.Fatalf("the backup has a LOCK file: %v", err)
	}

	// Restore, check, open.
	rdir := filepath.Join(dir, "restored")
	_, rep, err := Restore(ctx, vfs.OS, bdir, rdir, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("check of the restore: %+v", rep.Problems)
	}
	ropt := opt
	ropt.Dir = rdir
	r, err := Open(ropt)
	if err != nil {
		t.Fatalf("open the restore: %v", err)
	}
	defer r.Close()
	present := checkRestoredContents(t, r, before, during, after)
	checkRestoredDelivery(t, r, clk, before)
	t.Logf("%d acknowledged before the backup all restored; %d of %d acknowledged during it present, whole", len(before), present, len(during))
}

// sendBeforeBackup sends 600 messages to topic "b", a third of them due
// now, then cancels and reschedules some, and returns them with the state
// the restore must show.
func sendBeforeBackup(t *testing.T, e *Engine) []sentMsg {
	t.Helper()
	ctx := context.Background()
	send := func(key string, delay time.Duration) Receipt {
		r, err := e.Send(ctx, message.Message{Topic: "b", Key: key, Body: []byte("body-" + key)}, message.When{Delay: delay})
		if err != nil {
			t.Error(err)
		}
		return r
	}
	var before []sentMsg
	for i := 0; i < 600; i++ {
		k := fmt.Sprint("pre", i)
		switch i % 3 {
		case 0:
			before = append(before, sentMsg{send(k, 0), k, StateVisible})
		default:
			before = append(before, sentMsg{send(k, time.Duration(i)*time.Minute), k, StatePending})
		}
	}
	for i := 1; i < 120; i += 3 {
		if err := e.Cancel(ctx, before[i].r.ID); err != nil {
			t.Fatal(err)
		}
		before[i].state = StateCancelled
		if _, err := e.Reschedule(ctx, before[i+1].r.ID, message.When{Delay: 9 * time.Hour}, 0); err != nil {
			t.Fatal(err)
		}
	}
	return before
}

// backupSenders are senders running through a backup; each records its
// acknowledged sends as during or after the backup, by whether returned
// was already set when the send began (a send begun after the backup
// returned cannot be in it; one begun before may be, whenever its
// goroutine got to record it). They end once 50 sends begun after the
// backup returned were acknowledged, or on stop.
type backupSenders struct {
	mu            sync.Mutex
	during, after []sentMsg
	returned      bool
	stop          chan struct{}
	wg            sync.WaitGroup
}

// startBackupSenders starts 4 senders to topic "b".
func startBackupSenders(t *testing.T, e *Engine) *backupSenders {
	ctx := context.Background()
	ss := &backupSenders{stop: make(chan struct{})}
	for w := 0; w < 4; w++ {
		ss.wg.Add(1)
		go func() {
			defer ss.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-ss.stop:
					return
				default:
				}
				k := fmt.Sprintf("w%d-%d", w, i)
				// A send is "after" only if it began after the backup
				// returned: one acknowledged before that, whose goroutine
				// got here late, may well be in the backup.
				ss.mu.Lock()
				startedAfter := ss.returned
				ss.mu.Unlock()
				r, err := e.Send(ctx, message.Message{Topic: "b", Key: k, Body: []byte("body-" + k)}, message.When{Delay: time.Duration(i%2) * time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				ss.mu.Lock()
				if startedAfter {
					ss.after = append(ss.after, sentMsg{r: r, key: k})
				} else {
					ss.during = append(ss.during, sentMsg{r: r, key: k})
				}
				n := len(ss.after)
				ss.mu.Unlock()
				if n >= 50 {
					return
				}
			}
		}()
	}
	return ss
}

// checkRestoredContents checks the restore r: every message acknowledged
// before the backup is there in its state, one acknowledged during it is
// whole or absent, one acknowledged after it is absent, and nothing is
// visible before its due time. It returns how many of during are present.
func checkRestoredContents(t *testing.T, r *Engine, before, during, after []sentMsg) (present int) {
	t.Helper()
	for _, m := range before {
		in, err := r.Inspect(m.r.ID)
		near := m.state == StateVisible && (in.State == StatePending || in.State == StateDue)
		if err != nil || in.Key != m.key || in.State != m.state && !near {
			t.Fatalf("acknowledged before the backup: %s: %+v %v, want state %s", m.key, in, err, m.state)
		}
	}
	for _, m := range during {
		in, err := r.Inspect(m.r.ID)
		switch {
		case errs.CodeOf(err) == errs.NotFound:
		case err != nil || in.Key != m.key || in.BodyBytes != len("body-"+m.key) || in.Due != m.r.Due:
			t.Fatalf("acknowledged during the backup: %s: %+v %v: not whole", m.key, in, err)
		default:
			present++
		}
	}
	for _, m := range after {
		if _, err := r.Inspect(m.r.ID); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("sent after the backup returned, yet in it: %s: %v", m.key, err)
		}
	}
	// Nothing early: everything visible in the restore was due by now.
	now := r.Now()
	for q := 0; q < r.opts.DefaultQueues; q++ {
		vs, err := r.ReadQueue("b", q, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if v.Due > now {
				t.Fatalf("visible in the restore before its due time: %+v (now %d)", v, now)
			}
		}
	}
	return present
}

// checkRestoredDelivery checks that, once every due time has passed, every
// message acknowledged before the backup and not cancelled is visible.
func checkRestoredDelivery(t *testing.T, r *Engine, clk *clock.Fake, before []sentMsg) {
	t.Helper()
	waitParked(r, clk)
	clk.Advance(24 * time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range before {
		for {
			in, err := r.Inspect(m.r.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := StateVisible
			if m.state == StateCancelled {
				want = StateCancelled
			}
			if in.State == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: state %s a day later, want %s", m.key, in.State, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestBackupRejectsBadTargets: relative, non-empty, inside the data
// directory and parentless targets are InvalidArgument, and nothing is
// written.
func TestBackupRejectsBadTargets(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: filepath.Join(dir, "data"), FS: vfs.OS, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	full := filepath.Join(dir, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	for _, target := range []string{"relative/dir", full, filepath.Join(dir, "data", "b"), filepath.Join(dir, "no", "parent")} {
		if _, err := e.BackupWith(context.Background(), target, nil); errs.CodeOf(err) != errs.InvalidArgument {
			t.Errorf("backup to %s: %v, want InvalidArgument", target, err)
		}
	}
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)
	if _, err := e.BackupWith(context.Background(), empty, nil); err != nil {
		t.Fatalf("backup into an empty directory: %v", err)
	}
	if _, _, err := Restore(context.Background(), vfs.OS, empty, full, CheckOptions{}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}
	if _, _, err := Restore(context.Background(), vfs.OS, filepath.Join(dir, "data"), filepath.Join(dir, "r"), CheckOptions{}); err == nil {
		t.Fatal("restore from a live broker's directory succeeded")
	}
}

// Two backups into one new directory at once: one is written, the other
// refused with invalid_argument (the target is no longer empty), not an
// internal error, and no partial copy is left beside it.
func TestConcurrentBackupsIntoOneDirectory(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.FS = vfs.OS; o.Dir = t.TempDir() })
	h.send("t", "k", message.When{})
	root := t.TempDir()
	dir := filepath.Join(root, "b")
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := h.e.BackupWith(context.Background(), dir, nil)
			errc <- err
		}()
	}
	var ok, refused int
	for range 2 {
		switch err := <-errc; {
		case err == nil:
			ok++
		case errs.CodeOf(err) == errs.InvalidArgument:
			refused++
		default:
			t.Errorf("the losing backup: %v, want invalid_argument", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d written, %d refused; want 1 and 1", ok, refused)
	}
	names, _ := os.ReadDir(root)
	if len(names) != 1 {
		t.Fatalf("the backup root holds %d entries, want the backup alone", len(names))
	}
}

// A backup cut short by a crash leaves its temporary sibling beside the
// target (a hidden directory holding a partial copy); the next backup
// into that target removes it, and leaves other names alone.
func TestBackupRemovesWhatACrashLeft(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.FS = vfs.OS; o.Dir = t.TempDir() })
	h.send("t", "k", message.When{})
	root := t.TempDir()
	dir := filepath.Join(root, "b")
	left := filepath.Join(root, ".b.partial-0123456789ab")
	other := filepath.Join(root, ".c.partial-0123456789ab")
	for _, d := range []string{left, other} {
		if err := os.MkdirAll(filepath.Join(d, "log"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "log", "x"), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.e.BackupWith(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the leftover of a backup into %s is still there (%v)", dir, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("the leftover of another target was removed: %v", err)
	}
}
