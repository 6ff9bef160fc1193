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
	// Under the caller's lock this is O(buckets) of map and slice work
	// only: file names are made by Run. It runs under the engine's lock
	// in every checkpoint, and with tens of thousands of buckets its map
	// operations were most of a checkpoint's pause, so each bucket costs
	// as few as it can: the buffer is cleared whole, and the buckets to
	// make durable are those buffered plus those left dirty before (by a
	// failed job), without a pass through the dirty set for each one.
	j := &SyncJob{fs: s.fs, dir: s.dir, buckets: make([]int64, 0, len(s.buf)+len(s.dirty)),
		writes: make([]bucketWrites, 0, len(s.buf))}
	// A bucket new to inflight gets its one write from a block shared by
	// all of them (capacity 1 each, so a later append copies), not an
	// allocation of its own.
	block := make([]pendingWrite, len(s.buf))
	for b, data := range s.buf {
		w := pendingWrite{off: s.sizes[b], data: data}
		ws, ok := s.inflight[b]
		if ok {
			ws = append(ws, w)
		} else {
			block[0] = w
			ws, block = block[:1:1], block[1:]
		}
		s.inflight[b] = ws
		s.sizes[b] += int64(len(data))
		s.touch(b)
		j.buckets = append(j.buckets, b)
		// The job's view of a bucket's writes is capped at their number
		// now, so a later PrepareSync that appends to the same bucket
		// never changes it.
		j.writes = append(j.writes, bucketWrites{bucket: b, ws: ws[:len(ws):len(ws)]})
	}
	// Writes still in flight from a job that failed, of buckets with
	// nothing new buffered, go into this job too.
	if len(s.inflight) > len(s.buf) {
		for b, ws := range s.inflight {
			if _, buffered := s.buf[b]; !buffered {
				j.writes = append(j.writes, bucketWrites{bucket: b, ws: ws[:len(ws):len(ws)]})
			}
		}
	}
	for b := range s.dirty {
		if _, buffered := s.buf[b]; !buffered {
			j.buckets = append(j.buckets, b)
		}
	}
	clear(s.buf)
	clear(s.dirty)
	s.bufBytes = 0
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
	for _, w := range j.writes {
		b := w.bucket
		n := min(len(w.ws), len(s.inflight[b])) // fewer: removed meanwhile
		rest := s.inflight[b][n:]
		if len(rest) == 0 {
			delete(s.inflight, b)
		} else {
			s.inflight[b] = rest
		}
	}
}

// bucketWrites is a job's share of one bucket's inflight writes: the
// first len(ws) of them when the job was prepared.
type bucketWrites struct {
	bucket int64
	ws     []pendingWrite
}

// SyncJob writes entries and syncs bucket files; see PrepareSync.
type SyncJob struct {
	fs      vfs.FS
	dir     string
	writes  []bucketWrites
	buckets []int64 // the buckets whose files the job syncs
}

// Len returns the number of files the job syncs.
func (j *SyncJob) Len() int { return len(j.buckets) }

// SyncWorkers is how many bucket files a checkpoint's job fsyncs at once
// when it syncs them one by one (fewer than batchSyncMin files, or a
// filesystem without a batch sync): concurrent fsyncs on ext4 share
// journal commits.
const SyncWorkers = 64

// batchSyncMin is how many files make a sync job use one batch sync (when
// the filesystem has it) rather than one fsync per file.
//
// A batch sync (syncfs on Linux) writes back every dirty page of the whole
// filesystem, so its cost is not bounded by what the job wrote. It was
// weighed against 64 concurrent fdatasyncs (docs/benchmarks.md, issue 8
// third pass): for 8,192 small files of a raw writer the two took alike
// (rounds of 1.9 to 2.9 s against 1.4 to 2.9 s), and in the engine the
// checkpoint with 43,000 bucket files took 2.1 to 2.6 s with syncfs
// against 3.8 to 7.2 s with the fdatasyncs, with no better send latency
// meanwhile. So the batch sync stays; its data arrives at it already
// written out where the writes were large (vfs.WritePaced).
const batchSyncMin = 16

// Run writes the job's entries, then makes its files durable: with one
// batch sync when the filesystem has it (vfs.BatchSyncer) and there are at
// least batchSyncMin of them, else with up to workers concurrent fsyncs;
// then it syncs the directory. A large write starts its writeback as it
// goes (vfs.WritePaced), so no sync has a long burst to write.
func (j *SyncJob) Run(workers int) error {
	for _, w := range j.writes {
		if err := writeAll(j.fs, bucketPath(j.dir, w.bucket), w.ws); err != nil {
			return err
		}
	}
	if len(j.buckets) == 0 {
		return nil
	}
	if _, ok := j.fs.(vfs.BatchSyncer); ok && len(j.buckets) >= batchSyncMin {
		base := make([]string, len(j.buckets))
		for i, b := range j.buckets {
			base[i] = path.Base(bucketPath(j.dir, b))
		}
		if err := vfs.SyncFiles(j.fs, j.dir, base); err != nil {
			return err
		}
		return j.fs.SyncDir(j.dir)
	}
	workers = max(1, min(workers, len(j.buckets)))
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
	for _, b := range j.buckets {
		next <- bucketPath(j.dir, b)
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
		if err := vfs.WritePaced(f, w.data, w.off); err != nil {
			return err
		}
	}
	return nil
}
