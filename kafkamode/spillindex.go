package kafkamode

import (
	"container/heap"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/vfs"
)

// This file ties the spiller (spill.go) to the worker's index: where an
// entry far from due goes, when spilled buckets come back, and what
// cancels and snapshots read from disk.

// spillCopyCheck is how often the loop looks for spilled buckets old
// enough to copy forward (a scan of the bucket summaries).
const spillCopyCheck = time.Second

// openSpill prepares the worker's spill directory: Config.SpillDir (or a
// new temporary directory when empty), in which the worker uses a
// directory of its own, named after its group and ID, emptied now (what a
// crashed run left is stale). It returns the function that removes what
// it made, for a clean exit.
func (w *Worker) openSpill() (cleanup func(), err error) {
	if w.cfg.SpillDir == "" && w.cfg.SpillFS == nil {
		root, err := os.MkdirTemp("", "hourglass-kafka-spill-")
		if err != nil {
			return nil, fmt.Errorf("kafka mode: cannot create a temporary spill directory (set one that is writable): %w", err)
		}
		w.idx.spill = newSpiller(w.idx.fs(), root, w.cfg.NearWindow.Milliseconds())
		return func() { _ = os.RemoveAll(root) }, nil
	}
	dir := filepath.Join(w.cfg.SpillDir, spillDirName(w.cfg.Group, w.cfg.WorkerID))
	if w.cfg.SpillFS == nil {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("kafka mode: spill directory %s is not writable: %w", w.cfg.SpillDir, err)
		}
	}
	// A probe: the directory must take a file now, not at the first spill.
	if err := w.idx.fs().MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("kafka mode: spill directory %s is not writable: %w", w.cfg.SpillDir, err)
	}
	probe := filepath.Join(dir, "probe")
	f, err := w.idx.fs().Create(probe)
	if err == nil {
		_, err = f.WriteAt([]byte(spillMagic), 0)
		err = cmpErr(err, f.Close())
	}
	if err != nil {
		return nil, fmt.Errorf("kafka mode: spill directory %s is not writable: %w", w.cfg.SpillDir, err)
	}
	_ = w.idx.fs().Remove(probe)
	w.idx.spill = newSpiller(w.idx.fs(), dir, w.cfg.NearWindow.Milliseconds())
	if w.cfg.SpillFS != nil {
		return func() { w.idx.spill.reset() }, nil
	}
	return func() { _ = os.RemoveAll(dir) }, nil
}

// spillDirName is the name of a worker's own spill directory: its group
// and worker ID with every character but [a-zA-Z0-9._-] replaced by '_',
// and, when that changed anything, a hash of the two: "w 1" and "w_1"
// are two workers, and one emptying the other's directory at its start
// would end the other's session.
func spillDirName(group, workerID string) string {
	orig := group + "-" + workerID
	name := strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, orig)
	if name != orig {
		h := fnv.New32a()
		_, _ = h.Write([]byte(orig))
		name += fmt.Sprintf("-%08x", h.Sum32())
	}
	return name
}

// place indexes a pending entry that has no body: in a spill file when
// its bucket is beyond the near window, else in RAM.
func (x *loopIndex) place(pp *partProgress, se snapEntry, now int64) {
	if x.spill != nil && x.spill.wants(se.due, now) {
		x.spill.add(pp, se)
		return
	}
	x.indexNoBody(pp, se)
}

// indexNoBody puts an entry without body into the RAM index.
func (x *loopIndex) indexNoBody(pp *partProgress, se snapEntry) {
	e := &entry{pp: pp, offset: se.offset, due: se.due, ts: se.ts, keyHash: se.keyHash, back: se.back}
	x.due.push(e)
	x.noBody.push(e)
	x.queueCopy(e)
}

// indexAll indexes entries taken back from the spill.
func (x *loopIndex) indexAll(pp *partProgress, es []snapEntry) {
	x.stats.SpillLoaded.Add(int64(len(es)))
	for _, se := range es {
		x.indexNoBody(pp, se)
	}
}

// flushSpill writes what was spilled since the last flush. What cannot be
// written stays in RAM: nothing is lost, the worker only uses more memory.
func (x *loopIndex) flushSpill() {
	if x.spill == nil {
		return
	}
	failed, err := x.spill.flush()
	for _, f := range failed {
		x.indexNoBody(f.pp, f.e)
	}
	if err != nil {
		x.stats.SpillErrors.Add(int64(len(failed)))
		if !x.spillLogged {
			x.spillLogged = true
			x.cfg.Logger.Warn("cannot write to the spill directory; keeping entries in RAM (logged once)", "err", err)
		}
	}
	x.stats.Spilled.Store(x.spill.onDisk)
}

// loadSpilled drops the files of revoked partitions and takes back into
// RAM the buckets that entered the near window, and (once a second) those
// old enough to copy forward. A file that does not read back makes the
// loop end the session (spillErr): the next one rebuilds from Kafka.
func (x *loopIndex) loadSpilled(now int64) {
	if x.spill == nil || x.spillErr != nil {
		return
	}
	x.spill.dropDead()
	err := x.spill.loadDue(now, x.indexAll)
	if err == nil && time.Since(x.lastCopyCheck) >= spillCopyCheck {
		x.lastCopyCheck = time.Now()
		err = x.spill.loadOld(now, x.copyAfterMs, x.indexAll)
	}
	x.stats.Spilled.Store(x.spill.onDisk)
	x.failSpill(err)
}

// failSpill records a spill read error: the session ends, and the next
// one rebuilds the index from Kafka (the files are only a cache).
func (x *loopIndex) failSpill(err error) {
	if err != nil && x.spillErr == nil {
		x.stats.SpillErrors.Add(1)
		x.spillErr = fmt.Errorf("spill directory unreadable; rebuilding the index from Kafka: %w", err)
	}
}

// unspillTargets brings into RAM the spilled entries of c's partition a
// cancel c may cancel (by key hash or offset, below c), so that
// cancelTargets finds them. It reports false when the files could not be
// read: the cancel must then wait (the session ends, see failSpill).
func (x *loopIndex) unspillTargets(c *entry) bool {
	if x.spill == nil {
		return true
	}
	es, err := x.spill.takeOut(c.pp, func(se snapEntry) bool {
		return c.cancels(se.offset, c.pp.copies.firstOf(se.offset, se.back), se.keyHash)
	})
	if err != nil {
		x.failSpill(err)
		return false
	}
	x.indexAll(c.pp, es)
	x.stats.Spilled.Store(x.spill.onDisk)
	return true
}

// spilledForecast adds the spilled entries' counts of the live partitions
// to buckets (from plan) and returns how many it added.
func (x *loopIndex) spilledForecast(plan forecast.Plan, buckets []forecast.Bucket) int64 {
	if x.spill == nil {
		return 0
	}
	var n int64
	for pp, sp := range x.spill.parts {
		if pp.dropped.Load() {
			continue
		}
		for i, b := range plan.Run(sp.counts) {
			buckets[i].Count += b.Count
		}
		n += sp.counts.Total()
	}
	return n
}

// fs is the filesystem of the spill files.
func (x *loopIndex) fs() vfs.FS {
	if x.cfg.SpillFS != nil {
		return x.cfg.SpillFS
	}
	return vfs.OS
}

// compactAfter is the least number of dead slots (entries resolved while
// still in the due heap) that makes the loop rebuild its heaps.
const compactAfter = 4096

// compactIndex drops from the due and body heaps the entries resolved
// while still in them (copied forward, cancelled: they would otherwise
// stay until their due time, days away) once they are many and at least
// half of the heap, so RAM follows the near window after a mass cancel
// or a copy-forward of a whole bucket too.
func (x *loopIndex) compactIndex() {
	if x.deadSlots < compactAfter || x.deadSlots < len(x.due)/2 {
		return
	}
	x.dropDeadSlots()
}

// dropDeadSlots rebuilds the due and body heaps with their live entries.
func (x *loopIndex) dropDeadSlots() {
	for _, h := range []*dueHeap{&x.due, &x.noBody} {
		keep := (*h)[:0]
		for _, e := range *h {
			if e.live() {
				keep = append(keep, e)
			}
		}
		clear((*h)[len(keep):])
		*h = keep
		heap.Init(h)
	}
	x.deadSlots = 0
}
