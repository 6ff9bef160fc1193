package timerstore

import (
	"path"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Sync writes and makes every bucket durable, including new directory
// entries.
func (s *Store) Sync() error {
	j := s.PrepareSync()
	err := j.Run(1)
	s.Complete(j, err)
	return err
}

// PrepareSync hands every buffered entry to a job that writes it and then
// makes the buckets written since the last job durable. The job touches only
// files, so the engine runs it without holding its lock: with one-minute
// buckets a checkpoint may have thousands of files to write and sync. The
// caller must call Complete with the job's result, under its lock, before
// the next PrepareSync.
func (s *Store) PrepareSync() *SyncJob {
	for b, data := range s.buf {
		s.inflight[b] = append(s.inflight[b], pendingWrite{off: s.sizes[b], data: data})
		s.sizes[b] += int64(len(data))
		s.dirty[b] = true
		delete(s.buf, b)
		s.bufBytes -= len(data)
	}
	j := &SyncJob{fs: s.fs, dir: s.dir, writes: map[string][]pendingWrite{}, counts: map[int64]int{}}
	for b, ws := range s.inflight {
		j.writes[s.name(b)] = append([]pendingWrite(nil), ws...)
		j.counts[b] = len(ws)
	}
	for b := range s.dirty {
		j.buckets = append(j.buckets, b)
		j.names = append(j.names, s.name(b))
	}
	clear(s.dirty)
	return j
}

// Complete ends a job: on success its writes leave inflight; on failure its
// buckets are marked dirty again and its writes stay for the next job.
func (s *Store) Complete(j *SyncJob, err error) {
	if err != nil {
		for _, b := range j.buckets {
			if _, ok := s.sizes[b]; ok {
				s.dirty[b] = true
			}
		}
		return
	}
	for b, n := range j.counts {
		if n > len(s.inflight[b]) { // removed meanwhile
			n = len(s.inflight[b])
		}
		rest := s.inflight[b][n:]
		if len(rest) == 0 {
			delete(s.inflight, b)
		} else {
			s.inflight[b] = rest
		}
	}
}

// SyncJob writes entries and syncs bucket files; see PrepareSync.
type SyncJob struct {
	fs      vfs.FS
	dir     string
	writes  map[string][]pendingWrite
	counts  map[int64]int
	buckets []int64
	names   []string
}

// Len returns the number of files the job syncs.
func (j *SyncJob) Len() int { return len(j.names) }

// batchSyncMin is how many files make a sync job use one batch sync (when
// the filesystem has it) rather than one fsync per file.
const batchSyncMin = 16

// Run writes the job's entries, then makes its files durable: with one
// batch sync when the filesystem has it (vfs.BatchSyncer) and there are at
// least batchSyncMin of them, else with the given number of concurrent
// fsync workers; then it syncs the directory.
func (j *SyncJob) Run(workers int) error {
	for name, ws := range j.writes {
		if err := writeAll(j.fs, name, ws); err != nil {
			return err
		}
	}
	if len(j.names) == 0 {
		return nil
	}
	if _, ok := j.fs.(vfs.BatchSyncer); ok && len(j.names) >= batchSyncMin {
		// One syncfs for thousands of bucket files instead of one journal
		// commit each (vfs.BatchSyncer).
		base := make([]string, len(j.names))
		for i, n := range j.names {
			base[i] = path.Base(n)
		}
		if err := vfs.SyncFiles(j.fs, j.dir, base); err != nil {
			return err
		}
		return j.fs.SyncDir(j.dir)
	}
	workers = max(1, min(workers, len(j.names)))
	next := make(chan string)
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			var first error
			for name := range next {
				if first != nil {
					continue
				}
				f, err := j.fs.Open(name)
				if err != nil {
					first = err
					continue
				}
				if err := f.Sync(); err != nil {
					first = err
				}
				f.Close()
			}
			errc <- first
		}()
	}
	for _, n := range j.names {
		next <- n
	}
	close(next)
	var err error
	for w := 0; w < workers; w++ {
		if e := <-errc; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return err
	}
	return j.fs.SyncDir(j.dir)
}

// writeAll writes ws to the file name, creating it when the first write is
// at offset 0 (the file is new).
func writeAll(fs vfs.FS, name string, ws []pendingWrite) error {
	var f vfs.File
	var err error
	if ws[0].off == 0 {
		f, err = fs.Create(name)
	} else {
		f, err = fs.Open(name)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	for _, w := range ws {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			return err
		}
	}
	return nil
}
