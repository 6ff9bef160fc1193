package engine

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/hourglass-mq/hourglass/commitlog"
)

// Damaged records (issue 29).
//
// A message record that fails validation when a group is about to receive
// it (a bad checksum, length or type: media damage in a segment, or a skip
// frame repair left over it) cannot be served, and retrying cannot mend
// it. Handing the offset back, as for a read error, wedged the group: every
// later receive met the same record and answered unavailable for ever.
// So the engine sets the record aside for that group: it appends a
// set-aside record (recSetAside: group, queue, offset, position) that
// marks the offset done, as an ack does, and answers the receive with
// errs.DataLoss naming the position; the other messages of the batch are
// given back (their leases undone) and the next receive gets them. The
// set-aside record is applied the same way at replay, so a restart does
// not meet the damage again, and `hourglass check` lists every set-aside
// record the log holds.
//
// Damage is told from a read error by its kind: commitlog.DamagedAt says
// whether the bytes read failed validation. An I/O error (EIO) keeps its
// old treatment (unavailable, the leases given back): it may pass.
//
// Positions come from the queue index here, so they are record
// boundaries the fire record vouched for; a damaged length field only
// spoils its own record, and the next record is still found through its
// own queue entry. Inspect by ID does not answer data_loss: an ID's
// position is a client's claim, and a forged one at a non-boundary fails
// validation as damage would (it stays not_found, invariant E9).

// maxSetAsideListed bounds the set-asides an engine keeps in memory to
// list; SetAsideTotal still counts them all.
const maxSetAsideListed = 1000

// SetAside is a message a consumer group could not be given because its
// record failed validation: the receive that met it answered data_loss,
// and the group passed over it.
type SetAside struct {
	// Pos is the record's log position (the message's identity); Segment
	// the log file that holds it ("" once retention removed it).
	Pos     uint64 `json:"pos"`
	Segment string `json:"segment,omitempty"`
	Topic   string `json:"topic"`
	// Group is "" for a message an offset read (ReadQueue: a RocketMQ
	// pull) passed over: such reads have no group to set it aside for.
	Group  string `json:"group"`
	Queue  int    `json:"queue"`
	Offset uint64 `json:"offset"`
	// Reason is what failed validation; empty for a set-aside replayed
	// from the log at a restart.
	Reason string `json:"reason,omitempty"`
}

// DamageReport is what the running engine knows of damage in its log:
// the damaged ranges found in sealed segments (by the scrub), and the
// messages set aside.
type DamageReport struct {
	// Ranges are damaged ranges of sealed segments, oldest first. A range
	// stays listed until its segment is deleted or the process restarts
	// (the scrub then finds it again if it is still there).
	Ranges []commitlog.DamagedRange `json:"ranges"`
	// SetAside lists the most recent set-asides (at most 1,000), since
	// this process started or replayed from the log; SetAsideTotal counts
	// them all.
	SetAside      []SetAside `json:"set_aside"`
	SetAsideTotal int        `json:"set_aside_total"`
	// SetAsideLive counts the set-asides this process made (not replayed
	// from the log): only they, and Ranges, make Summary say something. A
	// set-aside replayed at a restart is history; if its damage is still
	// there, the scrub finds it again.
	SetAsideLive int `json:"-"`
}

// Damaged reports whether the report holds any damage.
func (r DamageReport) Damaged() bool { return len(r.Ranges) > 0 || r.SetAsideTotal > 0 }

// Segments counts the retained segments the report names: those of its
// ranges and of its set-asides.
func (r DamageReport) Segments() int {
	seen := map[string]bool{}
	for _, d := range r.Ranges {
		seen["log/"+d.Segment] = true
	}
	for _, s := range r.SetAside {
		if s.Segment != "" {
			seen[s.Segment] = true
		}
	}
	return len(seen)
}

// Summary is one line naming the first damage and counting the rest, for
// /healthz and logs; "" when there is none.
func (r DamageReport) Summary() string {
	switch {
	case len(r.Ranges) > 0:
		d := r.Ranges[0]
		return fmt.Sprintf("log segment %s: %d damaged bytes at position %d (%s); %d damaged range(s), %d message(s) set aside; stop the broker and run hourglass check, then hourglass repair",
			d.Segment, d.Length, d.Pos, d.Reason, len(r.Ranges), r.SetAsideTotal)
	case r.SetAsideLive > 0:
		s := r.SetAside[len(r.SetAside)-1]
		where := s.Segment
		if where == "" {
			where = "a removed segment"
		}
		return fmt.Sprintf("%d message(s) set aside as damaged since the start, the latest at position %d in log segment %s (topic %q, group %q); run hourglass check",
			r.SetAsideLive, s.Pos, where, s.Topic, s.Group)
	}
	return ""
}

// damageState holds the engine's damage report under its own lock, taken
// alone or after mu.
type damageState struct {
	mu       sync.Mutex
	ranges   map[commitlog.Pos]commitlog.DamagedRange
	setAside []SetAside
	total    int
	live     int             // of total, made by this process (Reason set)
	passed   map[uint64]bool // positions offset reads passed over
}

func (d *damageState) addSetAside(s SetAside) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.Group == "" {
		// An offset read's: the same reads come again, list it once.
		if d.passed[s.Pos] {
			return
		}
		if d.passed == nil {
			d.passed = map[uint64]bool{}
		}
		d.passed[s.Pos] = true
	}
	if len(d.setAside) == maxSetAsideListed {
		d.setAside = slices.Delete(d.setAside, 0, 1)
	}
	d.setAside = append(d.setAside, s)
	d.total++
	if s.Reason != "" {
		d.live++
	}
}

// setRanges records the damaged ranges found in the segment named seg,
// replacing what was known of it.
func (d *damageState) setRanges(seg string, rs []commitlog.DamagedRange) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ranges == nil {
		d.ranges = map[commitlog.Pos]commitlog.DamagedRange{}
	}
	for p, r := range d.ranges {
		if r.Segment == seg {
			delete(d.ranges, p)
		}
	}
	for _, r := range rs {
		d.ranges[r.Pos] = r
	}
}

// dropBefore forgets ranges of segments retention deleted.
func (d *damageState) dropBefore(start commitlog.Pos) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p := range d.ranges {
		if p < start {
			delete(d.ranges, p)
		}
	}
}

func (d *damageState) report() DamageReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := DamageReport{Ranges: make([]commitlog.DamagedRange, 0, len(d.ranges)), SetAside: slices.Clone(d.setAside), SetAsideTotal: d.total, SetAsideLive: d.live}
	for _, x := range d.ranges {
		r.Ranges = append(r.Ranges, x)
	}
	slices.SortFunc(r.Ranges, func(a, b commitlog.DamagedRange) int { return cmp.Compare(a.Pos, b.Pos) })
	if r.SetAside == nil {
		r.SetAside = []SetAside{}
	}
	return r
}

// Damage returns what the engine knows of damage in its log.
func (e *Engine) Damage() DamageReport {
	r := e.side.dmg.report()
	start := e.clog.Start()
	r.Ranges = slices.DeleteFunc(r.Ranges, func(d commitlog.DamagedRange) bool { return d.Pos < start })
	for i := range r.SetAside {
		if commitlog.Pos(r.SetAside[i].Pos) < start {
			r.SetAside[i].Segment = ""
		}
	}
	return r
}

// damagedHandout is a handout whose record failed validation.
type damagedHandout struct {
	handout
	pos uint64 // the message's identity (log position)
	err error
}

// passedOver reports a damaged message record an offset read (ReadQueue)
// passed over: it has no group to set it aside for. log and segmentOf are
// the engine's logger and its naming of the segment holding a position.
func (d *damageState) passedOver(log *slog.Logger, segmentOf func(uint64) string, pos uint64, topic string, queue int, offset uint64, err error) {
	d.mu.Lock()
	seen := d.passed[pos]
	d.mu.Unlock()
	if seen {
		return
	}
	log.Error("an offset read passed over a damaged message record", "topic", topic, "queue", queue, "offset", offset, "pos", pos, "err", err)
	d.addSetAside(SetAside{Pos: pos, Segment: segmentOf(pos), Topic: topic, Queue: queue, Offset: offset, Reason: err.Error()})
}

// replaySetAsideLocked applies a set-aside record at recovery: the
// offsets are done, and the report lists them.
func (r *recovery) replaySetAsideLocked(pos uint64, rec commitlog.Record) error {
	gid, items, err := decodeSetAside(rec.Payload)
	if err != nil {
		return err
	}
	g := r.cons.byIDLocked(gid)
	if g == nil {
		return fmt.Errorf("set-aside record at %d names unknown group %d", pos, gid)
	}
	for _, it := range items {
		if int(it.queue) >= len(g.queues) {
			return fmt.Errorf("set-aside record at %d names queue %d of %d", pos, it.queue, len(g.queues))
		}
		g.queues[it.queue].markDone(it.offset)
		r.side.dmg.addSetAside(SetAside{Pos: it.pos, Segment: r.segs.segmentOf(it.pos), Topic: g.topic.name, Group: g.name, Queue: int(it.queue), Offset: it.offset})
	}
	return nil
}
