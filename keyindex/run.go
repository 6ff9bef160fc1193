package keyindex

import (
	"encoding/binary"
	"sort"
	"sync"

	"github.com/hourglass-mq/hourglass/sortedrun"
)

// blockPool holds the buffers Gets read blocks into.
var blockPool = sync.Pool{New: func() any { return new([BlockSize]byte) }}

// get looks h up in run r: one pread of the block the sparse index (the
// first hash of each block) points at, which is checked before it is
// believed.
func get(r *sortedrun.Run, h uint64, b []byte) (uint64, bool, error) {
	i := sort.Search(len(r.First), func(i int) bool { return r.First[i] > h }) - 1
	if i < 0 {
		return 0, false, nil
	}
	n, err := r.ReadBlock(b, i)
	if err != nil {
		return 0, false, err
	}
	j := sort.Search(n, func(j int) bool { return binary.LittleEndian.Uint64(b[j*slotSize:]) >= h })
	if j == n {
		return 0, false, nil
	}
	if sh, pos := slot(b, j); sh == h {
		return pos, true, nil
	}
	return 0, false, nil
}
