package schedule

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"reflect"
	"sort"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

const dir = "/d/schedules"

func openStore(t *testing.T, fsys vfs.FS) (*Store, map[string]*Schedule) {
	t.Helper()
	s, all, err := OpenStore(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, all
}

func appendBytes(t *testing.T, fsys vfs.FS, b []byte) {
	t.Helper()
	f, err := fsys.Open(path.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, _ := f.Size()
	if _, err := f.WriteAt(b, n); err != nil {
		t.Fatal(err)
	}
}

// TestStoreRoundTripAndCompaction: every change survives a reopen, and the
// reopened journal is compacted to one record per schedule.
func TestStoreRoundTripAndCompaction(t *testing.T) {
	fsys := vfs.NewMem()
	s, all := openStore(t, fsys)
	if len(all) != 0 {
		t.Fatalf("a new store has %d schedules", len(all))
	}
	a := &Schedule{ID: "a", Topic: "t", Key: "k", Tag: "tag", Properties: map[string]string{"x": "1", "y": ""},
		Body: []byte{0, 1, 2}, Cron: "0 9 * * *", TZ: "Europe/Berlin", CatchUp: CatchUpAll, Created: 5, Through: 5}
	b := &Schedule{ID: "b", Topic: "t", Cron: "@every 1m", TZ: "UTC", CatchUp: CatchUpSkip, Created: 7, Through: 7, Paused: true}
	for _, sc := range []*Schedule{a, b, {ID: "c", Topic: "t", Cron: "@hourly", TZ: "UTC", CatchUp: CatchUpOnce}} {
		if err := s.Put(sc); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		if err := s.Progress([]Progress{{ID: "a", Through: int64(100 + i), LastFire: int64(100 + i), LastID: "id-a"}, {ID: "gone", Through: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("c"); err != nil {
		t.Fatal(err)
	}
	grown := s.Size()
	s.Close()

	s, all = openStore(t, fsys)
	defer s.Close()
	a.Through, a.LastFire, a.LastID = 149, 149, "id-a"
	if !reflect.DeepEqual(all, map[string]*Schedule{"a": a, "b": b}) {
		t.Fatalf("reopened: %+v %+v", all["a"], all["b"])
	}
	if s.Size() >= grown/2 {
		t.Fatalf("not compacted: %d bytes, %d before", s.Size(), grown)
	}
}

// TestStoreTornTailAndDamage: a torn last write is cut; a bad record
// followed by a good one is refused, not cut.
func TestStoreTornTailAndDamage(t *testing.T) {
	fsys := vfs.NewMem()
	s, _ := openStore(t, fsys)
	if err := s.Put(&Schedule{ID: "a", Topic: "t", Cron: "@hourly", TZ: "UTC", CatchUp: CatchUpOnce}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A progress frame cut short, as a crash mid-write leaves it.
	frame := appendFrame(nil, recProgress, make([]byte, 200))
	appendBytes(t, fsys, frame[:90])
	s, all := openStore(t, fsys)
	if len(all) != 1 {
		t.Fatalf("after a torn tail: %d schedules", len(all))
	}
	if err := s.Put(&Schedule{ID: "b", Topic: "t", Cron: "@hourly", TZ: "UTC", CatchUp: CatchUpOnce}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Damage in the first record, with a valid one after it.
	f, _ := fsys.Open(path.Join(dir, journalName))
	if _, err := f.WriteAt([]byte{0xff}, headerSize+12); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := OpenStore(fsys, dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open of a damaged journal: %v, want ErrCorrupt", err)
	}
}

// TestStoreStopsAfterFailedSync: after a failed fsync the store writes
// nothing more (the kernel may have dropped the data).
func TestStoreStopsAfterFailedSync(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	s, _ := openStore(t, ff)
	defer s.Close()
	ff.FailAfter(vfs.OpSync, 0, syscall.EIO)
	if err := s.Put(&Schedule{ID: "a"}); !errors.Is(err, ErrStopped) {
		t.Fatalf("put with a failing fsync: %v", err)
	}
	ff.Inject(nil)
	if err := s.Delete("a"); !errors.Is(err, ErrStopped) {
		t.Fatalf("a write after a failed fsync: %v, want ErrStopped", err)
	}
}

// TestStorePowerLoss: a power loss during any write (the image a crash
// leaves while a frame is written but not yet synced, cut at a random
// byte) reopens to the state before that write or after it, never to
// anything else: every acknowledged change is there.
func TestStorePowerLoss(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		mem := vfs.NewMem()
		ff := vfs.NewFaulty(mem)
		s, _ := openStore(t, ff)
		model := map[string]*Schedule{}
		var image *vfs.Mem
		var before, after map[string]*Schedule // the state before and after the write the power failed in
		// The power fails at the first write or sync after the crashAt-th
		// write: the frame is in the page cache, maybe not on disk.
		crashAt := 1 + rng.IntN(30)
		writes := 0
		ff.Inject(func(op vfs.Op, _ string) error {
			if image == nil && writes >= crashAt && (op == vfs.OpSync || op == vfs.OpWrite) {
				image, before = mem.Crash(rng), cloneAll(model)
			}
			if op == vfs.OpWrite {
				writes++
			}
			return nil
		})
		for i := 0; i < 30 && image == nil; i++ {
			id := fmt.Sprintf("s%d", rng.IntN(5))
			var err error
			switch k := rng.IntN(3); {
			case k == 0 || model[id] == nil:
				sc := &Schedule{ID: id, Topic: "t", Cron: "@hourly", TZ: "UTC", CatchUp: CatchUpOnce, Created: int64(i), Through: int64(i), Body: []byte(id)}
				err = s.Put(sc)
				c := *sc
				model[id] = &c
			case k == 1:
				err = s.Progress([]Progress{{ID: id, Through: int64(100 + i), LastFire: int64(100 + i), LastID: "m"}})
				model[id].Through, model[id].LastFire, model[id].LastID = int64(100+i), int64(100+i), "m"
			default:
				err = s.Delete(id)
				delete(model, id)
			}
			if err != nil {
				t.Fatal(err)
			}
			after = cloneAll(model)
		}
		s.Close()
		if image == nil {
			continue
		}
		_, got, err := OpenStore(image, dir)
		if err != nil {
			t.Fatalf("seed %d: reopen after a power loss: %v", seed, err)
		}
		if !reflect.DeepEqual(got, before) && !reflect.DeepEqual(got, after) {
			t.Fatalf("seed %d: after a power loss %v; want %v or %v", seed, keys(got), keys(before), keys(after))
		}
	}
}

func cloneAll(m map[string]*Schedule) map[string]*Schedule {
	out := map[string]*Schedule{}
	for k, v := range m {
		c := *v
		out[k] = &c
	}
	return out
}

func keys(m map[string]*Schedule) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s:%d", k, v.Through))
	}
	sort.Strings(out)
	return out
}

// FuzzJournal: any bytes in the journal file open to some state or to an
// error, never a panic, and a journal that opened reopens to the same
// state after its compaction.
func FuzzJournal(f *testing.F) {
	mem := vfs.NewMem()
	s, _, err := OpenStore(mem, dir)
	if err != nil {
		f.Fatal(err)
	}
	s.Put(&Schedule{ID: "a", Topic: "t", Cron: "@hourly", TZ: "UTC", CatchUp: CatchUpOnce, Properties: map[string]string{"k": "v"}, Body: []byte("b")})
	s.Progress([]Progress{{ID: "a", Through: 5, LastFire: 5, LastID: "x"}})
	s.Delete("a")
	s.Close()
	jf, _ := mem.Open(path.Join(dir, journalName))
	n, _ := jf.Size()
	seed := make([]byte, n)
	jf.ReadAt(seed, 0)
	jf.Close()
	f.Add(seed)
	f.Add(seed[:headerSize])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := vfs.NewMem()
		fsys.MkdirAll(dir)
		w, _ := fsys.Create(path.Join(dir, journalName))
		w.WriteAt(data, 0)
		w.Close()
		s, first, err := OpenStore(fsys, dir)
		if err != nil {
			return
		}
		s.Close()
		s, again, err := OpenStore(fsys, dir)
		if err != nil {
			t.Fatalf("a journal that opened does not reopen after compaction: %v", err)
		}
		s.Close()
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("compaction changed the state: %v, then %v", keys(first), keys(again))
		}
	})
}

// TestCompactWhoseDirSyncFails: once a compaction's rename is done, the
// new file is the journal; if the directory's fsync then fails the store
// stops, so no change is acknowledged into the old, unlinked file (a
// review found Put and Delete acknowledged and gone at the next open).
func TestCompactWhoseDirSyncFails(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	s, _ := openStore(t, ff)
	a := &Schedule{ID: "a", Topic: "t", Cron: "@hourly", TZ: "UTC", CatchUp: CatchUpOnce, Body: []byte("a")}
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	ff.FailAfter(vfs.OpSyncDir, 0, syscall.EIO)
	if err := s.Compact(map[string]*Schedule{"a": a}); err == nil {
		t.Fatal("a compaction whose directory fsync failed reported success")
	}
	ff.Inject(nil)
	if err := s.Put(&Schedule{ID: "b", Topic: "t", Cron: "@hourly", TZ: "UTC", CatchUp: CatchUpOnce}); !errors.Is(err, ErrStopped) {
		t.Fatalf("a write after the failed compaction: %v, want ErrStopped", err)
	}
	s.Close()
	s2, all := openStore(t, mem)
	defer s2.Close()
	if len(all) != 1 || all["a"] == nil {
		t.Fatalf("reopened: %v, want schedule a alone", all)
	}
}

// TestOpenOnAFullDisk: a journal that cannot be compacted at open (the
// disk is full) is read all the same, and the store starts stopped, so the
// broker starts: it refused to, until space was freed. A reopen with room
// compacts it and writes again.
func TestOpenOnAFullDisk(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	s, _ := openStore(t, ff)
	for _, id := range []string{"a", "b"} {
		if err := s.Put(&Schedule{ID: id, Topic: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	ff.SetLimit(ff.Used())
	s, all, err := OpenStore(ff, dir)
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	if len(all) != 2 || !errors.Is(s.Err(), ErrStopped) || !errors.Is(s.Err(), syscall.ENOSPC) {
		t.Fatalf("read %d schedules, store error %v; want 2 and stopped for the full disk", len(all), s.Err())
	}
	if err := s.Put(&Schedule{ID: "c"}); !errors.Is(err, ErrStopped) {
		t.Fatalf("a write to the stopped store: %v", err)
	}
	s.Close()
	ff.SetLimit(-1)
	s, all = openStore(t, ff)
	defer s.Close()
	if len(all) != 2 || s.Err() != nil {
		t.Fatalf("reopened with room: %d schedules, error %v", len(all), s.Err())
	}
	if err := s.Put(&Schedule{ID: "c"}); err != nil {
		t.Fatalf("a write after the reopen: %v", err)
	}
}
