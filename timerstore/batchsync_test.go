package timerstore

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// TestSyncJobBatchSync: a job over many buckets makes all of them durable
// through the filesystem's batch sync, on the memory model (a crash keeps
// every entry) and on the OS (syncfs on Linux).
func TestSyncJobBatchSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"mem", vfs.NewMem(), "timers"}, {"os", vfs.OS, t.TempDir() + "/timers"}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.fs, tc.dir, 1000)
			if err != nil {
				t.Fatal(err)
			}
			const n = 3 * batchSyncMin
			for i := 0; i < n; i++ {
				if err := s.Add(Entry{Due: int64(i) * 1000, Pos: uint64(i + 1), Kind: 1}); err != nil {
					t.Fatal(err)
				}
			}
			j := s.PrepareSync()
			if j.Len() != n {
				t.Fatalf("job syncs %d files, want %d", j.Len(), n)
			}
			err = j.Run(4)
			s.Complete(j, err)
			if err != nil {
				t.Fatal(err)
			}
			if mem, ok := tc.fs.(*vfs.Mem); ok {
				img := mem.Crash(nil)
				s2, err := Open(img, tc.dir, 1000)
				if err != nil {
					t.Fatal(err)
				}
				if err := s2.Verify(s.Sizes()); err != nil {
					t.Fatalf("after a crash: %v", err)
				}
				for i := 0; i < n; i++ {
					es, err := s2.Load(int64(i) * 1000)
					if err != nil || len(es) != 1 || es[0].Pos != uint64(i+1) {
						t.Fatalf("bucket %d after a crash: %v %v", i, es, err)
					}
				}
			}
		})
	}
}
