package vfs

import "slices"

// memNode is a file (or the entry of a subdirectory, when dir is set).
//
// Invariant: synced may share its backing array with data to make Sync O(1)
// (shared is then true); while shared, bytes of data below len(synced) must
// not be modified in place — mutateLocked detaches synced first. Bytes at or
// beyond len(synced) are not part of synced, so appends need no copy.
type memNode struct {
	dir    bool
	data   []byte // current content
	synced []byte // durable content
	shared bool   // synced aliases data's backing array
	// lost holds the indexes of the pages (MemPageSize bytes each) that a
	// failed Sync marked clean without writing: their current bytes are
	// what reads return, their durable bytes are those of synced (zeros
	// past its end) whatever later Syncs do. Empty in the common case, so
	// that Sync stays O(1). A page leaves lost when a write or truncate
	// touches it (it is dirty again) or when the file no longer reaches it.
	lost map[int64]struct{}
}

// mutateLocked prepares n for a change of data's bytes from index lo on: if
// that range overlaps the durable bytes that share data's array, the durable
// bytes get their own copy first.
func (n *memNode) mutateLocked(lo int64) {
	if n.shared && lo < int64(len(n.synced)) {
		n.synced = slices.Clone(n.synced)
		n.shared = false
	}
}

// touchLocked records that bytes [lo, hi) of the current data change: the
// pages they fall in are dirty again, so none of them stays lost.
func (n *memNode) touchLocked(lo, hi int64) {
	if len(n.lost) == 0 || hi <= lo {
		return
	}
	first, last := lo/MemPageSize, (hi-1)/MemPageSize
	for p := range n.lost {
		if p >= first && p <= last {
			delete(n.lost, p)
		}
	}
}

// durableByte returns the durable byte at i: synced's, or zero past its
// end (a region the file never durably held reads as a hole).
func (n *memNode) durableByte(i int64) byte {
	if i < int64(len(n.synced)) {
		return n.synced[i]
	}
	return 0
}

// writebackLocked returns what writing back every dirty page would leave on
// disk: the current data, except that lost pages keep their durable bytes.
// Without lost pages it is the current data itself (not a copy).
func (n *memNode) writebackLocked() []byte {
	if len(n.lost) == 0 {
		return n.data
	}
	out := slices.Clone(n.data)
	for p := range n.lost {
		lo, hi := p*MemPageSize, min((p+1)*MemPageSize, int64(len(out)))
		for i := lo; i < hi; i++ {
			out[i] = n.durableByte(i)
		}
	}
	return out
}

// dropDirtyLocked is what a failed fsync does: every dirty page (one whose
// current bytes differ from its durable ones and that is not lost already)
// is marked clean without being written, so it joins lost. Pages equal to
// their durable content need no tracking: losing them changes nothing.
func (n *memNode) dropDirtyLocked() {
	size := int64(len(n.data))
	for p := int64(0); p*MemPageSize < size; p++ {
		if _, ok := n.lost[p]; ok {
			continue
		}
		lo, hi := p*MemPageSize, min((p+1)*MemPageSize, size)
		for i := lo; i < hi; i++ {
			if n.data[i] != n.durableByte(i) {
				if n.lost == nil {
					n.lost = make(map[int64]struct{})
				}
				n.lost[p] = struct{}{}
				break
			}
		}
	}
}

// resizeLocked sets the current length to size, zero-filling any growth.
// The pages between the old and the new end are dirty (the kernel zeroes
// the tail of a cut page and writes it again).
func (n *memNode) resizeLocked(size int64) {
	old := int64(len(n.data))
	n.touchLocked(min(old, size), max(old, size))
	if size <= old {
		n.data = n.data[:size]
		return
	}
	n.mutateLocked(old)
	if size <= int64(cap(n.data)) {
		n.data = n.data[:size]
		clear(n.data[old:])
		return
	}
	n.data = append(n.data, make([]byte, size-old)...)
}

// overwrittenLocked returns the runs [lo, hi) of bytes below the durable
// length whose writeback wb (writebackLocked's) differs from the durable
// bytes: what was overwritten in place and not synced since.
func (n *memNode) overwrittenLocked(wb []byte) [][2]int {
	if n.shared && len(n.lost) == 0 {
		return nil // synced is a prefix of data: nothing differs
	}
	var runs [][2]int
	end := min(len(wb), len(n.synced))
	for i := 0; i < end; {
		if wb[i] == n.synced[i] {
			i++
			continue
		}
		j := i + 1
		for j < end && wb[j] != n.synced[j] {
			j++
		}
		runs = append(runs, [2]int{i, j})
		i = j
	}
	return runs
}
