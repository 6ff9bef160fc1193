package schedule

import (
	"errors"
	"path"
	"reflect"
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
