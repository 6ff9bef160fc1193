package engine

// The cache checks of Check (check.go): queue indexes, the overlay journal,
// timer buckets and the key index, each against what the log says.

import (
	"errors"
	"path"
	"strconv"
	"strings"

	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/queueindex"
	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/vfs"
)

func (c *checker) listCache(name string) ([]string, error) {
	names, err := c.fs.List(c.path(name))
	if vfs.IsNotExist(err) {
		return nil, nil
	}
	return names, err
}

// queues checks every queue index.
func (c *checker) queues() error {
	recorded := map[string]int64{}
	for _, t := range c.ck.Topics {
		for q, n := range t.Entries {
			recorded[path.Join("queues", strconv.FormatUint(uint64(t.ID), 10), strconv.Itoa(q)+".qi")] = n
		}
	}
	seen := map[string]bool{}
	dirs, err := c.listCache("queues")
	if err != nil {
		return err
	}
	for _, d := range dirs {
		id, err := strconv.ParseUint(d, 10, 32)
		if err != nil {
			continue
		}
		files, err := c.fs.List(c.path("queues", d))
		if err != nil {
			return err
		}
		for _, f := range files {
			q, ok := strings.CutSuffix(f, ".qi")
			qn, err := strconv.Atoi(q)
			if !ok || err != nil {
				continue
			}
			name := path.Join("queues", d, f)
			seen[name] = true
			if err := c.queue(name, uint32(id), uint16(qn), recorded[name]); err != nil {
				return err
			}
		}
	}
	for name, n := range recorded {
		if n > 0 && !seen[name] {
			c.problem(name, 0, "missing; the checkpoint recorded %d entries: recovery refuses to start", n)
		}
	}
	return nil
}

func (c *checker) queue(name string, topic uint32, queue uint16, recorded int64) error {
	if _, ok := c.topics[topic]; !ok {
		c.problem(name, 0, "queue index of topic %d, which no topic record or checkpoint defines", topic)
	}
	n, partial, err := queueindex.Walk(c.fs, c.path(name), func(i uint64, e queueindex.Entry, ok bool) error {
		off := int64(i) * queueindex.EntrySize
		c.rep.QueueEntries++
		durable := int64(i) < recorded
		if !ok {
			if durable {
				c.problem(name, off, "entry %d fails its checksum, below the %d entries the checkpoint vouched for", i, recorded)
			} else {
				c.note(name, off, "entry %d past the checkpoint's %d fails its checksum (a torn write); recovery cuts it", i, recorded)
			}
			return nil
		}
		m, wrong := c.target(e.Pos)
		switch {
		case wrong != "" && !durable && e.Pos >= c.rep.LogHead:
			c.note(name, off, "entry %d past the checkpoint's %d %s (its record was lost with the log's tail); recovery cuts it", i, recorded, wrong)
		case wrong != "":
			c.problem(name, off, "entry %d %s", i, wrong)
		case m != nil && (m.topic != topic || m.queue != queue):
			c.problem(name, off, "entry %d points at a message of topic %d queue %d", i, m.topic, m.queue)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if int64(n) < recorded {
		c.problem(name, int64(n)*queueindex.EntrySize, "has %d entries, the checkpoint recorded %d: recovery refuses to open it", n, recorded)
	}
	if partial > 0 {
		c.note(name, int64(n)*queueindex.EntrySize, "%d bytes of a torn entry; recovery cuts them", partial)
	}
	return nil
}

// overlay checks the overlay journal and collects the due times it holds.
func (c *checker) overlay() error {
	files, err := c.listCache(overlayDir)
	if err != nil {
		return err
	}
	present := map[uint64]bool{}
	for _, f := range files {
		seg, err := strconv.ParseUint(strings.TrimSuffix(f, overlayFiles), 10, 64)
		if err != nil || !strings.HasSuffix(f, overlayFiles) {
			continue
		}
		name := path.Join(overlayDir, f)
		recorded, listed := c.ck.OverlayFiles[seg]
		if !listed || seg < c.rep.LogStart {
			c.note(name, 0, "not named by the checkpoint, or of a segment retention removed; recovery removes it")
			continue
		}
		present[seg] = true
		b, err := readAll(c.fs, c.path(name))
		if err != nil {
			return err
		}
		for off := int64(0); off+ovEntrySize <= int64(len(b)); off += ovEntrySize {
			c.rep.OverlayEntries++
			pos, ov, ok := decodeOverlayEntry(b[off : off+ovEntrySize])
			switch {
			case !ok && off < recorded:
				c.problem(name, off, "entry fails its checksum, below the %d bytes the checkpoint vouched for: recovery refuses to start", recorded)
			case !ok:
				c.note(name, off, "entry past the checkpoint's %d bytes fails its checksum (a torn write); recovery cuts it", recorded)
			default:
				if _, wrong := c.target(pos); wrong != "" {
					if off >= recorded && pos >= c.rep.LogHead {
						c.note(name, off, "entry past the checkpoint's %d bytes %s; recovery cuts it", recorded, wrong)
					} else {
						c.problem(name, off, "entry %s", wrong)
					}
				}
				c.dues[pos] = append(c.dues[pos], ov.Due)
			}
		}
		if int64(len(b)) < recorded {
			c.problem(name, int64(len(b)), "is %d bytes, the checkpoint recorded %d: recovery refuses to start", len(b), recorded)
		}
	}
	for seg, n := range c.ck.OverlayFiles {
		if n > 0 && seg >= c.rep.LogStart && !present[seg] {
			c.problem(path.Join(overlayDir, strconv.FormatUint(seg, 10)+overlayFiles), 0, "missing; the checkpoint recorded %d bytes: recovery refuses to start", n)
		}
	}
	return nil
}

// timers checks the timer index runs the checkpoint lists, and every live
// entry in them against the log.
func (c *checker) timers() error {
	if c.ck.timersLegacy {
		c.note("timers", 0, "timer index in the layout of an older hourglass; recovery rebuilds it from the log")
		return nil
	}
	listed, damage, err := timerstore.Walk(c.fs, c.path("timers"), c.ck.TimerState, func(name string, off int64, e timerstore.Entry, dead bool) error {
		c.rep.TimerEntries++
		if dead {
			return nil // of a bucket already loaded: loading skips it
		}
		c.timerEntry(path.Join("timers", path.Base(name)), off, e)
		return nil
	})
	if err != nil {
		return err
	}
	c.cacheDamage("timers", "timer index", damage)
	return c.unlisted("timers", listed, timerstore.IsRunName, true)
}

// timerEntry checks one live timer entry against the message it names.
func (c *checker) timerEntry(file string, off int64, e timerstore.Entry) {
	m, wrong := c.target(e.Pos)
	switch {
	case e.Kind != kindMessage && e.Kind != kindWindowed:
		c.problem(file, off, "entry of unknown kind %d", e.Kind)
	case wrong != "":
		c.problem(file, off, "entry %s", wrong)
	case m != nil && (m.topic != e.Topic || m.queue != e.Queue):
		c.problem(file, off, "entry of topic %d queue %d points at a message of topic %d queue %d", e.Topic, e.Queue, m.topic, m.queue)
	case m != nil && m.due != e.Due && m.fire != e.Due && len(c.dues[e.Pos]) == 0:
		// A message that was rescheduled may leave entries of its earlier
		// due times, which loading filters out; the records of those times
		// may be gone with their segments, so only a message never
		// rescheduled is judged.
		c.problem(file, off, "entry due at %d points at a message due at %d, which was never rescheduled", e.Due, m.due)
	}
}

// cacheDamage reports the damage a walk of a run-based cache found.
func (c *checker) cacheDamage(dir, what string, damage []error) {
	for _, d := range damage {
		// Both caches' damage is a sortedrun.CorruptError.
		var ce *sortedrun.CorruptError
		file, off, msg := dir, int64(0), d.Error()
		if errors.As(d, &ce) {
			file, off, msg = ce.File, ce.Offset, ce.What
		}
		if file == "state" {
			file = checkpointFile
		} else if file != dir {
			file = path.Join(dir, path.Base(file))
		}
		c.problem(file, off, "%s: %s; recovery rebuilds it from the log", what, msg)
	}
}

// damageMarkFile is the mark the key and timer indexes leave in their
// directory when a check after Open finds damage.
const damageMarkFile = sortedrun.DamageMark

// unlisted notes the run files of dir that the checkpoint does not list,
// which recovery deletes, and the other files when recovery deletes those
// too (others).
func (c *checker) unlisted(dir string, listed []string, isRun func(string) bool, others bool) error {
	files, err := c.listCache(dir)
	if err != nil {
		return err
	}
	isListed := map[string]bool{}
	for _, n := range listed {
		isListed[n] = true
	}
	for _, f := range files {
		switch {
		case isListed[f]:
		case f == damageMarkFile:
			// Left by the running broker's check of runs it opened from
			// their tails (keyindex.Index.Verify, timerstore.RunsPlan.Each).
			c.problem(path.Join(dir, f), 0, "a check of the running broker found damage in this index; recovery rebuilds it from the log")
		case isRun(f):
			c.note(path.Join(dir, f), 0, "a run the checkpoint does not list (written after it, or replaced by a merge); recovery deletes it")
		case others:
			c.note(path.Join(dir, f), 0, "not a run file of this hourglass (a timer bucket file of an older one?); recovery deletes it")
		}
	}
	return nil
}

// keys checks the key index runs the checkpoint lists.
func (c *checker) keys() error {
	dir := c.path("keys")
	listed, damage, err := keyindex.Walk(c.fs, dir, c.ck.KeyState, func(name string, off int64, h, pos uint64) error {
		c.rep.KeyEntries++
		file := path.Join("keys", path.Base(name))
		m, wrong := c.target(pos)
		switch {
		case wrong != "":
			c.problem(file, off, "entry %s", wrong)
		case m != nil && (!m.hasKey || m.keyHash != h) && (m.dedupHash == 0 || m.dedupHash != h):
			c.problem(file, off, "entry for key hash %016x points at a message without that key or dedup ID", h)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.cacheDamage("keys", "key index", damage)
	return c.unlisted("keys", listed, func(f string) bool { return strings.HasSuffix(f, ".kix") }, false)
}
