package vfs

import (
	"maps"
	"math/rand/v2"
	"slices"
)

// Crash returns a new Mem holding what a power loss at this instant would
// leave: the durable entries of every directory, each file with its durable
// data. m itself is unchanged, so a test can take many crash images of one
// run.
//
// With a non-nil rng each file additionally keeps a random prefix (possibly
// empty, possibly all) of its unsynced changes, taken in offset order: the
// bytes it overwrote in place below its durable length (a preallocated
// file's zeros, say), then its bytes beyond that length (with the pages a
// failed Sync dropped keeping their durable bytes instead: see the type).
// Writes reach the disk in offset order but may be cut at any byte: an
// unsynced record written over zeros may be whole, torn, or zeros again.
// Every other byte is the durable one, and no byte is ever made up. Directory entries are not randomized: an unsynced
// entry is always lost. Files and directories are visited in sorted order,
// so the same rng seed gives the same image.
func (m *Mem) Crash(rng *rand.Rand) *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	image := func(n *memNode) *memNode {
		data := slices.Clone(n.synced)
		if rng == nil {
			return &memNode{data: data, synced: slices.Clone(data)}
		}
		// Lost pages were marked clean: writeback never sends them.
		wb := n.writebackLocked()
		runs := n.overwrittenLocked(wb)
		extra := max(0, len(wb)-len(n.synced))
		if len(runs) == 0 {
			if extra > 0 {
				k := rng.IntN(extra + 1)
				data = append(data, wb[len(n.synced):len(n.synced)+k]...)
			}
			return &memNode{data: data, synced: slices.Clone(data)}
		}
		// Bytes overwritten in place (a preallocated file's zeros, say)
		// reach the disk in offset order too, before those appended.
		total := extra
		for _, r := range runs {
			total += r[1] - r[0]
		}
		k := rng.IntN(total + 1)
		for _, r := range runs {
			m := min(k, r[1]-r[0])
			copy(data[r[0]:r[0]+m], wb[r[0]:r[0]+m])
			k -= m
		}
		if k > 0 {
			data = append(data, wb[len(n.synced):len(n.synced)+k]...)
		}
		return &memNode{data: data, synced: slices.Clone(data)}
	}
	return m.copyLocked(func(d *memDir) map[string]*memNode { return d.durable }, image)
}

// Clone returns a new Mem with the current state of m: current entries and
// data, and the same durable state, so that Crash of the clone equals Crash
// of m. Open handles are not carried over.
func (m *Mem) Clone() *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	clone := func(n *memNode) *memNode {
		return &memNode{data: slices.Clone(n.data), synced: slices.Clone(n.synced), lost: maps.Clone(n.lost)}
	}
	return m.copyLocked(func(d *memDir) map[string]*memNode { return d.entries }, clone)
}

// copyLocked builds a new Mem whose directories hold, as both current and
// durable entries, the set pick selects from each of m's directories, with
// every file node replaced once by conv (a node with two names stays one
// node). For Clone the durable sets are then filled in from m's durable sets.
func (m *Mem) copyLocked(pick func(*memDir) map[string]*memNode, conv func(*memNode) *memNode) *Mem {
	c := &Mem{dirs: make(map[string]*memDir, len(m.dirs))}
	nodes := make(map[*memNode]*memNode)
	convert := func(n *memNode) *memNode {
		if n.dir {
			return &memNode{dir: true}
		}
		if cn, ok := nodes[n]; ok {
			return cn
		}
		cn := conv(n)
		nodes[n] = cn
		return cn
	}
	paths := make([]string, 0, len(m.dirs))
	for p := range m.dirs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		src := m.dirs[p]
		cd := newMemDir()
		set := pick(src)
		names := make([]string, 0, len(set))
		for name := range set {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			cd.entries[name] = convert(set[name])
		}
		c.dirs[p] = cd
	}
	// Durable sets: for a crash image the durable set is what was picked;
	// for a clone it is m's durable set, mapped to the same nodes.
	for _, p := range paths {
		src, cd := m.dirs[p], c.dirs[p]
		names := make([]string, 0, len(src.durable))
		for name := range src.durable {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			n := src.durable[name]
			if n.dir {
				cd.durable[name] = cd.entries[name]
				continue
			}
			if _, picked := nodes[n]; !picked {
				nodes[n] = conv(n)
			}
			cd.durable[name] = nodes[n]
		}
	}
	return c
}
