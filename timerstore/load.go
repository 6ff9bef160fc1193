package timerstore

import (
	"sort"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Load returns the entries of the bucket starting at b, without duplicate
// (due, pos) pairs, in due order. An entry that fails its check, or a file
// missing or shorter than what was written to it, is an ErrCorrupt: after
// Trim every byte of a file was either vouched for by the checkpoint or
// written by this process, so nothing in it may be torn.
func (s *Store) Load(b int64) ([]Entry, error) {
	return s.LoadPlan(b).Read()
}

// LoadPlan captures, cheaply and without I/O, what Read needs to return
// the entries of bucket b: its length, and the bytes that are still in
// memory (buffered, or in a sync job's hands). The owner takes the plan
// under its lock and calls Read without it, so that reading a bucket of a
// million entries does not stall its other work. Entries added after the
// plan was taken are not in it: the owner must schedule those itself.
func (s *Store) LoadPlan(b int64) *LoadPlan {
	p := &LoadPlan{fs: s.fs, name: s.name(b), bucket: b, width: s.width}
	size, ok := s.sizes[b]
	if !ok {
		return p
	}
	p.size = size
	// From lo on, the bytes may still be in a sync job's hands: the file
	// may be shorter there, or not exist yet when lo is 0. The job's writes
	// are contiguous up to size, so inflight supplies all of them.
	p.lo = size
	for _, w := range s.inflight[b] {
		p.lo = min(p.lo, w.off)
	}
	p.inflight = append(p.inflight, s.inflight[b]...)
	p.buf = append([]byte(nil), s.buf[b]...)
	return p
}

// LoadPlan is what LoadPlan captured; Read may run without the owner's
// lock: it reads only bytes of the file below lo, which no one rewrites
// while the bucket is not removed, and the in-memory bytes it copied.
type LoadPlan struct {
	fs       vfs.FS
	name     string
	bucket   int64
	width    int64
	size, lo int64
	inflight []pendingWrite
	buf      []byte
}

// Read returns the plan's entries without duplicates, in due order. A bad
// entry, or a file missing or shorter than recorded, is ErrCorrupt.
func (p *LoadPlan) Read() ([]Entry, error) {
	if p.size == 0 && len(p.buf) == 0 {
		return nil, nil
	}
	data := make([]byte, p.size)
	if p.lo > 0 {
		if err := readFile(p.fs, p.name, p.lo, data[:p.lo], func(int64, []byte) error { return nil }); err != nil {
			return nil, err
		}
	}
	for _, w := range p.inflight {
		copy(data[w.off:], w.data)
	}
	data = append(data, p.buf...)
	type key struct {
		due int64
		pos uint64
	}
	seen := make(map[key]bool, len(data)/EntrySize)
	out := make([]Entry, 0, len(data)/EntrySize)
	for off := 0; off+EntrySize <= len(data); off += EntrySize {
		e, ok := decode(data[off:off+EntrySize], p.bucket, p.width)
		if !ok {
			return nil, corrupt(p.name, int64(off), "entry fails its check")
		}
		k := key{e.Due, e.Pos}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Due < out[j].Due })
	return out, nil
}
