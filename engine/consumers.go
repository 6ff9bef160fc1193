package engine

import (
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
)

// consumers holds the consumer groups and what they wait for. Guarded by
// Engine.mu, except that groups is read without it. Its fields are its own
// (ownership_test.go).
type consumers struct {
	// What the groups are given at Open: the engine's locks, options
	// (read-only after Open), clock, log, stats and sealers, and the parts
	// they ask, through their methods: it calls no part that calls it
	// (partgraph_test.go).
	mu    *sync.Mutex
	gate  *ckptGate
	opts  *Options
	clock *clock.Broker
	log   *commitlog.Log
	stats *Stats
	ids   *idents
	life  *lifecycle
	cat   *catalog
	disp  *dispatcher
	segs  *segTable
	dmg   *damageState
	// groups holds the groups by topic and name (groupKey). It is written
	// under mu (installLocked) and read without it, so that a receive
	// finds its group without queueing for the engine's lock once more. A
	// group is never removed: a group found stays the group of its name.
	groups          sync.Map // groupKey -> *group
	groupsByID      map[uint32]*group
	nextGroupID     uint32
	leaseSeq        uint32
	deadLetters     []deadLetter      // waiting to be moved by the loop
	deadLetterAfter int64             // no dead-lettering before this (after a failure)
	forGroup        map[uint64]uint32 // messages for one group falling due soon: position -> group (forgroup.go)
	// trail holds the nacks and lease expiries the loop has yet to write
	// (trailrec.go): they change nothing durable, so nothing waits for them.
	trail []trailEntry
}

// group returns the group of topic and name, or nil; no lock needed.
func (c *consumers) group(topic, name string) *group {
	if v, ok := c.groups.Load(groupKey(topic, name)); ok {
		return v.(*group)
	}
	return nil
}

func newConsumers(mu *sync.Mutex, gate *ckptGate, opts *Options, clk *clock.Broker, log *commitlog.Log, stats *Stats, ids *idents,
	life *lifecycle, cat *catalog, disp *dispatcher, segs *segTable, dmg *damageState) *consumers {
	return &consumers{
		mu: mu, gate: gate, opts: opts, clock: clk, log: log, stats: stats, ids: ids,
		life: life, cat: cat, disp: disp, segs: segs, dmg: dmg,
		groupsByID: map[uint32]*group{}, nextGroupID: 1,
	}
}

// byIDLocked returns the group with id, or nil.
func (c *consumers) byIDLocked(id uint32) *group { return c.groupsByID[id] }

// eachLocked calls fn with every group, in no order.
func (c *consumers) eachLocked(fn func(g *group)) {
	for _, g := range c.groupsByID {
		fn(g)
	}
}

// countLocked is the number of groups.
func (c *consumers) countLocked() int { return len(c.groupsByID) }

// nextIDLocked is the id the next group created gets.
func (c *consumers) nextIDLocked() uint32 { return c.nextGroupID }

// installLocked makes the group id of topic t known, live or at replay; ids
// given later are above it.
func (c *consumers) installLocked(id uint32, t *topic, cfg GroupConfig, name string) *group {
	g := &group{id: id, name: name, topic: t, cfg: cfg, dlq: DeadLetterTopic(t.name, name), internal: isEngineGroup(t.name, name)}
	for range t.queues {
		g.queues = append(g.queues, newGroupQueue())
	}
	c.groups.Store(groupKey(t.name, name), g)
	c.groupsByID[id] = g
	if id >= c.nextGroupID {
		c.nextGroupID = id + 1
	}
	return g
}

// nextLeaseSeqLocked is the sequence number of a new lease: receipts
// carry it, so that one of an earlier lease of the message never matches.
func (c *consumers) nextLeaseSeqLocked() uint32 {
	c.leaseSeq++
	return c.leaseSeq
}

// addDeadLettersLocked queues moves to dead-letter topics for the loop.
func (c *consumers) addDeadLettersLocked(jobs ...deadLetter) {
	c.deadLetters = append(c.deadLetters, jobs...)
}

// deadLettersDueLocked reports whether moves wait and may run at now.
func (c *consumers) deadLettersDueLocked(now int64) bool {
	return len(c.deadLetters) > 0 && now >= c.deadLetterAfter
}

// takeDeadLettersLocked hands the waiting moves over to the loop.
func (c *consumers) takeDeadLettersLocked() []deadLetter {
	jobs := c.deadLetters
	c.deadLetters = nil
	return jobs
}

// retryDeadLettersLocked gives moves that failed back, to be tried again
// after pause: not at once, so as not to spin on a failing disk.
func (c *consumers) retryDeadLettersLocked(now int64, pause time.Duration, jobs []deadLetter) {
	c.deadLetters = append(c.deadLetters, jobs...)
	c.deadLetterAfter = now + pause.Milliseconds()
}

// setAsideHandouts writes the set-aside record of bad (handouts whose
// records failed validation), applies it, and returns the data_loss error
// the receive answers. The caller holds gate shared and has given the
// group's other handouts back. If the record cannot be written, the
// damaged handouts are given back too and the receive answers the storage
// error: the next one meets them again.
func (c *consumers) setAsideHandouts(g *group, bad []damagedHandout) error {
	rec := encodeSetAside(g.id, bad)
	_, err := c.log.Append(rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		for _, b := range bad {
			if c.takeBackLocked(g, b.handout) {
				g.queues[b.queue].ready = append(g.queues[b.queue].ready, b.offset)
			}
		}
		return c.life.storageErrLocked(err)
	}
	for _, b := range bad {
		c.takeBackLocked(g, b.handout)
		g.queues[b.queue].markDone(b.offset)
	}
	first := bad[0]
	for _, b := range bad {
		c.dmg.addSetAside(SetAside{Pos: b.pos, Segment: c.segs.segmentOf(b.pos), Topic: g.topic.name, Group: g.name,
			Queue: int(b.queue), Offset: b.offset, Reason: b.err.Error()})
	}
	c.opts.Logger.Error("damaged message records set aside: the group passes over them", "topic", g.topic.name, "group", g.name,
		"messages", len(bad), "first_pos", first.pos, "err", first.err)
	return errs.Wrap(errs.DataLoss, first.err,
		"%d message(s) of topic %s could not be read for group %s: the record at log position %d (queue %d, offset %d) is damaged; it was set aside (GET /v1/admin/damage, hourglass check lists it) and the next receive gets the messages after it",
		len(bad), g.topic.name, g.name, first.pos, first.queue, first.offset)
}

// setAsideDeadLetter sets aside, for j's group, the message j was to move
// to the dead-letter topic, whose record at pos is damaged: there is
// nothing to copy. Like a set-aside at a receive, it marks the offset
// done and the report lists it.
func (c *consumers) setAsideDeadLetter(j deadLetter, pos uint64, cause error) error {
	bad := []damagedHandout{{handout: handout{queue: j.queue, offset: j.offset}, pos: pos, err: cause}}
	c.gate.RLock()
	defer c.gate.RUnlock()
	if _, err := c.log.Append(encodeSetAside(j.g.id, bad)); err != nil {
		return c.life.storageErr(err)
	}
	c.mu.Lock()
	j.g.queues[j.queue].markDone(j.offset)
	c.mu.Unlock()
	c.dmg.addSetAside(SetAside{Pos: pos, Segment: c.segs.segmentOf(pos), Topic: j.g.topic.name, Group: j.g.name,
		Queue: int(j.queue), Offset: j.offset, Reason: cause.Error()})
	c.opts.Logger.Error("a message to dead-letter has a damaged record: set aside instead", "topic", j.g.topic.name, "group", j.g.name, "pos", pos, "err", cause)
	return nil
}

// forgetForGroupLocked forgets that the message at pos is for one group
// (it was cancelled).
func (c *consumers) forgetForGroupLocked(pos uint64) { delete(c.forGroup, pos) }

// forGroupWaitingLocked reports whether messages for one group wait to
// fire: their entries must be passed over by the other groups.
func (c *consumers) forGroupWaitingLocked() bool { return len(c.forGroup) > 0 }

// maxTrailWaiting bounds the trail entries waiting for the loop, so that a
// stalled disk cannot grow them without end; past it, the oldest go and
// the loss is logged.
const maxTrailWaiting = 1 << 16

// noteTrailLocked queues the trail entry of a nack or lease expiry of the
// lease l of g at at; back is when the message comes back (0: it is
// dead-lettered). The engine's own group has no trail.
func (c *consumers) noteTrailLocked(g *group, l *lease, kind trailKind, at, back int64) {
	if g.internal || !l.hasPos {
		return
	}
	if len(c.trail) >= maxTrailWaiting {
		c.opts.Logger.Warn("trail entries waiting for the disk are over the limit: the oldest are dropped from message histories", "dropped", len(c.trail)/2)
		c.trail = append(c.trail[:0], c.trail[len(c.trail)/2:]...)
	}
	c.trail = append(c.trail, trailEntry{kind: kind, pos: l.pos, group: g.id, attempt: l.attempt, at: at, arg: back})
	c.life.kickLoop()
}

// takeTrailLocked hands the waiting trail entries over to the loop.
func (c *consumers) takeTrailLocked() []trailEntry {
	es := c.trail
	c.trail = nil
	return es
}

// writeTrail writes trail entries the loop took. A failed write loses
// them from the histories, and says so: they are history, not state, and
// the disk that refused them fails the writes that matter too. A log
// failed for good stops the engine here as under any other append.
func (c *consumers) writeTrail(es []trailEntry) {
	c.gate.RLock()
	defer c.gate.RUnlock()
	if _, err := c.log.Append(encodeTrail(es)); err != nil {
		c.opts.Logger.Error("trail record write failed: nacks and lease expiries are missing from message histories", "entries", len(es), "err", err)
		c.life.storageErr(err)
	}
}
