package kafkamode

import (
	"fmt"
	"path"
	"slices"
	"strconv"

	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/vfs"
)

// spiller keeps the pending entries due beyond the near window in local
// time-bucket files (spillfile.go), so that the worker's RAM holds only
// what falls due soon. It is owned by the worker's loop goroutine.
//
// Invariants:
//   - a pending entry is in exactly one place: in RAM (the due heap), in
//     a spill file (not in removed), or in buf until the next flush;
//   - an entry is spilled only into a bucket whose start lies beyond
//     now + near, and a bucket is loaded once its start is at or before
//     now + near: so every spilled entry is back in RAM at least near
//     before its due time (BodyLead < near then fetches its body in time);
//   - the files are a cache of what Kafka holds (snapshot, delay topic):
//     a partition's files are never read by another incarnation of it.
type spiller struct {
	fs    vfs.FS
	root  string
	near  int64 // ms: entries due beyond now+near are spilled
	width int64 // ms: a bucket's span of due times
	seq   int   // numbers the partitions' directories
	parts map[*partProgress]*spillPart
	// order lists, ascending and once each, the buckets some partition
	// wrote a file for; owners names those partitions (an owner whose
	// bucket was taken since, or that is gone, is skipped).
	order  []int64
	owners map[int64][]*spillPart
	// onDisk counts the entries in the files (removed ones excluded).
	onDisk int64
}

// spillPart is the spilled index of one incarnation of a delay partition.
type spillPart struct {
	pp      *partProgress
	dir     string
	made    bool // dir exists
	buckets map[int64]*spillBucket
	// counts are the spilled entries by due second, for the forecast.
	counts *forecast.Counts
	// removed holds offsets taken out of the files (for a cancel) before
	// their bucket loaded; the load skips them.
	removed map[int64]struct{}
	// buf holds entries to write at the next flush, by bucket.
	buf map[int64][]snapEntry
}

// spillBucket is the in-RAM summary of one bucket file.
type spillBucket struct {
	size  int64 // valid bytes of the file; 0: not created yet
	count int64 // entries in the file, removed ones excluded
	minTs int64 // oldest record timestamp written (for copy-forward)
}

// newSpiller returns a spiller writing under root (which exists) through
// fs; near is the near window in ms (> 0). A bucket spans half of it.
func newSpiller(fs vfs.FS, root string, near int64) *spiller {
	return &spiller{fs: fs, root: root, near: near, width: max(1, near/2), parts: map[*partProgress]*spillPart{},
		owners: map[int64][]*spillPart{}}
}

// bucketOf is the bucket holding due time due (floor division).
func (s *spiller) bucketOf(due int64) int64 {
	b := due / s.width
	if due%s.width != 0 && due < 0 {
		b--
	}
	return b
}

// wants reports whether an entry due at due, read at now, goes to disk.
func (s *spiller) wants(due, now int64) bool {
	return s.bucketOf(due)*s.width > now+s.near
}

// part returns (creating it) the spilled index of pp.
func (s *spiller) part(pp *partProgress) *spillPart {
	sp := s.parts[pp]
	if sp == nil {
		s.seq++
		sp = &spillPart{pp: pp, dir: path.Join(s.root, "p"+strconv.Itoa(int(pp.partition))+"-"+strconv.Itoa(s.seq)),
			buckets: map[int64]*spillBucket{}, counts: forecast.New(), removed: map[int64]struct{}{}, buf: map[int64][]snapEntry{}}
		s.parts[pp] = sp
	}
	return sp
}

// add queues e of pp for the next flush. The caller checked wants.
func (s *spiller) add(pp *partProgress, e snapEntry) {
	sp := s.part(pp)
	b := s.bucketOf(e.due)
	sp.buf[b] = append(sp.buf[b], e)
}

// spilledEntry is an entry of a partition, for the loop to index.
type spilledEntry struct {
	pp *partProgress
	e  snapEntry
}

// flush writes the queued entries to their bucket files. It returns the
// entries it could not write (the caller keeps them in RAM) and the first
// error.
func (s *spiller) flush() (failed []spilledEntry, firstErr error) {
	for _, sp := range s.parts {
		for b, es := range sp.buf {
			delete(sp.buf, b)
			if err := s.write(sp, b, es); err != nil {
				firstErr = cmpErr(firstErr, err)
				for _, e := range es {
					failed = append(failed, spilledEntry{pp: sp.pp, e: e})
				}
			}
		}
	}
	return failed, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func (sp *spillPart) file(b int64) string {
	return path.Join(sp.dir, strconv.FormatInt(b, 10)+".spill")
}

// write appends es to bucket b's file at its valid length; on failure the
// summary is unchanged, so the bytes written are never read.
func (s *spiller) write(sp *spillPart, b int64, es []snapEntry) error {
	if !sp.made {
		if err := s.fs.MkdirAll(sp.dir); err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		sp.made = true
	}
	bk := sp.buckets[b]
	var buf []byte
	var f vfs.File
	var err error
	if bk == nil || bk.size == 0 {
		buf = append(make([]byte, 0, len(spillMagic)+len(es)*spillEntrySize), spillMagic...)
		f, err = s.fs.Create(sp.file(b))
	} else {
		buf = make([]byte, 0, len(es)*spillEntrySize)
		f, err = s.fs.Open(sp.file(b))
	}
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	for _, e := range es {
		buf = appendSpillEntry(buf, e)
	}
	at := int64(0)
	if bk != nil {
		at = bk.size
	}
	_, err = f.WriteAt(buf, at)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spill: write %s: %w", sp.file(b), err)
	}
	if bk == nil {
		bk = &spillBucket{minTs: es[0].ts}
		sp.buckets[b] = bk
		if i, found := slices.BinarySearch(s.order, b); !found {
			s.order = slices.Insert(s.order, i, b)
		}
		s.owners[b] = append(s.owners[b], sp)
	}
	bk.size = at + int64(len(buf))
	bk.count += int64(len(es))
	for _, e := range es {
		bk.minTs = min(bk.minTs, e.ts)
		sp.counts.Add(forecast.SecondOf(e.due), 1)
	}
	s.onDisk += int64(len(es))
	return nil
}

// read returns the entries of bucket b's file that are still spilled (not
// removed).
func (s *spiller) read(sp *spillPart, b int64) ([]snapEntry, error) {
	es, err := s.readFile(sp, b)
	if err != nil || len(sp.removed) == 0 {
		return es, err
	}
	keep := es[:0]
	for _, e := range es {
		if _, gone := sp.removed[e.offset]; !gone {
			keep = append(keep, e)
		}
	}
	return keep, nil
}

// readFile returns every entry of bucket b's file, removed ones included.
func (s *spiller) readFile(sp *spillPart, b int64) ([]snapEntry, error) {
	bk := sp.buckets[b]
	if bk == nil || bk.size == 0 {
		return nil, nil
	}
	f, err := s.fs.Open(sp.file(b))
	if err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	defer f.Close()
	raw := make([]byte, bk.size)
	if _, err := f.ReadAt(raw, 0); err != nil {
		return nil, fmt.Errorf("spill: read %s: %w", sp.file(b), err)
	}
	es, err := decodeSpill(raw)
	if err != nil {
		return nil, fmt.Errorf("spill: %s: %w", sp.file(b), err)
	}
	return es, nil
}

// take reads bucket b of sp for the loop to index, then forgets it and
// removes its file (a file that cannot be removed is only disk space: the
// next incarnation uses another directory).
func (s *spiller) take(sp *spillPart, b int64) ([]snapEntry, error) {
	all, err := s.readFile(sp, b)
	if err != nil {
		return nil, err
	}
	es := all[:0]
	for _, e := range all {
		if _, gone := sp.removed[e.offset]; gone {
			delete(sp.removed, e.offset) // its file is going: forget it
			continue
		}
		sp.counts.Add(forecast.SecondOf(e.due), -1)
		es = append(es, e)
	}
	s.onDisk -= sp.buckets[b].count
	delete(sp.buckets, b)
	_ = s.fs.Remove(sp.file(b))
	return es, nil
}

// loadDue takes every bucket whose start is at or before now + near and
// hands its entries to f, partition by partition. Buckets of dropped
// partitions are skipped (dropDead removes them).
func (s *spiller) loadDue(now int64, f func(*partProgress, []snapEntry)) error {
	for len(s.order) > 0 && s.order[0]*s.width <= now+s.near {
		b := s.order[0]
		for len(s.owners[b]) > 0 {
			sp := s.owners[b][0]
			if s.parts[sp.pp] == sp && sp.buckets[b] != nil { // else stale: taken already, or gone
				es, err := s.take(sp, b)
				if err != nil {
					return err // sp stays first: the session ends anyway
				}
				f(sp.pp, es)
			}
			s.owners[b] = s.owners[b][1:]
		}
		delete(s.owners, b)
		s.order = s.order[1:]
	}
	return nil
}

// loadOld takes every bucket holding a record at least copyAfter old at
// now (copy-forward must see it before retention deletes it) and hands its
// entries to f. It scans the bucket summaries: call it seldom.
func (s *spiller) loadOld(now, copyAfter int64, f func(*partProgress, []snapEntry)) error {
	if copyAfter <= 0 {
		return nil
	}
	for _, sp := range s.parts {
		for b, bk := range sp.buckets {
			if bk.minTs+copyAfter > now || sp.pp.dropped.Load() {
				continue
			}
			es, err := s.take(sp, b)
			if err != nil {
				return err
			}
			f(sp.pp, es)
		}
	}
	return nil
}

// takeOut removes from pp's files the entries match selects and returns
// them (they are indexed in RAM by the caller: a cancel needs them).
func (s *spiller) takeOut(pp *partProgress, match func(snapEntry) bool) ([]snapEntry, error) {
	sp := s.parts[pp]
	if sp == nil {
		return nil, nil
	}
	var out []snapEntry
	for b, bk := range sp.buckets {
		es, err := s.read(sp, b)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if match(e) {
				sp.removed[e.offset] = struct{}{}
				sp.counts.Add(forecast.SecondOf(e.due), -1)
				bk.count--
				s.onDisk--
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// appendEntries appends to out every entry of pp still spilled (files
// and buffer), growing out once.
func (s *spiller) appendEntries(out []snapEntry, pp *partProgress) ([]snapEntry, error) {
	sp := s.parts[pp]
	if sp == nil {
		return out, nil
	}
	n := 0
	for _, bk := range sp.buckets {
		n += int(bk.count)
	}
	for _, es := range sp.buf {
		n += len(es)
	}
	out = slices.Grow(out, n)
	for b := range sp.buckets {
		es, err := s.read(sp, b)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	for _, es := range sp.buf {
		out = append(out, es...)
	}
	return out, nil
}

// dropDead forgets the partitions revoked or lost and removes their files.
func (s *spiller) dropDead() {
	for pp, sp := range s.parts {
		if pp.dropped.Load() {
			s.drop(sp)
		}
	}
}

func (s *spiller) drop(sp *spillPart) {
	for b, bk := range sp.buckets {
		s.onDisk -= bk.count
		_ = s.fs.Remove(sp.file(b))
	}
	delete(s.parts, sp.pp)
}

// reset forgets every partition and removes their files: a new group
// session rebuilds its index from Kafka.
func (s *spiller) reset() {
	for _, sp := range s.parts {
		s.drop(sp)
	}
	s.order, s.owners = nil, map[int64][]*spillPart{}
}
