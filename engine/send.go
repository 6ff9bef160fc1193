package engine

import (
	"context"
	"errors"
	"path"
	"strconv"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/queueindex"
)

// SendRequest is one message to send and when to deliver it.
type SendRequest struct {
	Message message.Message
	When    message.When
	// DedupIgnore names properties that do not count when a send with a
	// dedup ID is compared with the first one: fields a client's retry
	// sets anew (RocketMQ's born timestamp), which would otherwise make
	// every retry a conflict. The stored message keeps them.
	DedupIgnore []string
	// SystemProperties names the properties of Message that a protocol
	// adapter added for its own bookkeeping (RocketMQ's born timestamp,
	// born host, keys). They do not count against the sender's limits
	// (Limits.MaxProperties, MaxHeaderBytes) but against a budget of
	// their own (message.Limits.ValidateSystem), so that a RocketMQ
	// client may send as many properties as RocketMQ allows.
	SystemProperties []string
	// ForGroup, when not empty, names the one consumer group of the
	// message's topic that receives it: RocketMQ's %RETRY%<group>, for a
	// consumer's retry sent back (with a delay, say) or a redrive. The
	// topic's other groups never receive it, after any restart too, and
	// their backlogs do not count it once it is visible (the engine may
	// count it for a moment for a group created after it fired, or one
	// further behind than MaxUnackedSpan). The group must exist on the
	// topic, else the send fails with NotFound. The group is in the
	// message's record; Inspect shows it.
	ForGroup string
}

// Receipt is what a send returns: the handle to cancel, reschedule or
// inspect the message, and when it will become visible.
type Receipt struct {
	ID    message.ID
	Topic string
	Queue int
	Due   int64 // Unix ms
	// Duplicate says the send repeated an earlier one's dedup ID within
	// its window: nothing was stored, and ID and Due are the first
	// message's.
	Duplicate bool
}

// Send durably accepts one message. In sync flush mode it returns after the
// message is on disk.
func (e *Engine) Send(ctx context.Context, m message.Message, w message.When) (Receipt, error) {
	rs, err := e.SendBatch(ctx, []SendRequest{{Message: m, When: w}})
	if err != nil {
		return Receipt{}, err
	}
	return rs[0], nil
}

// SendBatch durably accepts several messages in one commit-log write: all
// or none. Every message is validated before anything is written; the
// error of the first invalid one names its index.
func (e *Engine) SendBatch(ctx context.Context, reqs []SendRequest) ([]Receipt, error) {
	return e.sendBatch(ctx, reqs, false, nil)
}

// sendBatch is SendBatch; internal is the engine's own send (a redrive),
// which may go to a topic of the reserved dead-letter namespace. a, if
// not nil, is an ack (its leases stopped) written in the same append
// after the messages and applied with them: a redrive's copies and the
// ack of their dead letters are durable together or not at all. On an
// error the caller restores a's leases.
func (e *Engine) sendBatch(ctx context.Context, reqs []SendRequest, internal bool, a *ackBatch) ([]Receipt, error) {
	if len(reqs) == 0 {
		return nil, errs.New(errs.InvalidArgument, "batch is empty")
	}
	if len(reqs) > e.opts.MaxBatch {
		return nil, errs.New(errs.TooLarge, "batch has %d messages; the limit is %d", len(reqs), e.opts.MaxBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now, wall := e.clock.NowWall()
	stored, tops, err := e.prepareBatch(reqs, now, wall, internal)
	if err != nil {
		return nil, err
	}
	recs := make([]commitlog.Record, 0, len(reqs))

	// Dedup IDs are claimed before gate: a send waiting for another send of
	// its ID holds nothing a checkpoint or an appender needs (dedup.go).
	plan, release, err := e.side.dedup.dedupCheck(ctx, stored, now)
	if err != nil {
		return nil, err
	}
	defer release()
	for i, s := range stored {
		if plan.stores(i) {
			recs = append(recs, commitlog.Record{Type: recMessage, Payload: message.Encode(nil, s)})
		}
	}
	out := make([]Receipt, len(reqs))
	if len(recs) == 0 && a == nil {
		// Only duplicates: nothing to write, but a stopped engine answers
		// no send, not even with an earlier receipt.
		if err := e.life.available(); err != nil {
			return nil, err
		}
		for i := range out {
			out[i] = *plan.dup[i]
		}
		return out, nil
	}

	e.gate.RLock()
	defer e.gate.RUnlock()
	if err := e.life.available(); err != nil {
		return nil, err
	}
	pos, err := e.clog.Append(a.appendRecord(recs)...)
	if err != nil {
		return nil, e.life.storageErr(err)
	}
	e.mu.Lock()
	a.doneLocked(e.life) // a nil a does nothing
	k := 0
	for i, s := range stored {
		if !plan.stores(i) {
			continue
		}
		e.applyMessageLocked(uint64(pos[k]), s, tops[i])
		out[i] = Receipt{ID: e.ids.seal.ID(uint64(pos[k]), s.Nonce), Topic: s.Topic, Queue: s.Queue, Due: s.Due}
		k++
	}
	e.mu.Unlock()
	for i := range out {
		switch {
		case plan.stores(i):
		case plan.dup[i] != nil:
			out[i] = *plan.dup[i]
		default:
			out[i] = out[plan.ref[i]]
			out[i].Duplicate = true
		}
	}
	e.stats.Sent.Add(uint64(k))
	e.life.kickLoop()
	return out, nil
}

// storageErr classifies a commit-log failure for the caller: a send, an
// ack, a cancel or any other write, so its words name none of them.
func storageErr(err error) error {
	switch {
	case errors.Is(err, commitlog.ErrFailed):
		// Checked first: a stopped log may wrap ErrDiskFull too.
		return errs.Wrap(errs.Unavailable, err, "storage failed: nothing was written, and the broker stopped; restart it")
	case errors.Is(err, commitlog.ErrDiskFull):
		return errs.Wrap(errs.ResourceExhausted, err, "disk full: nothing was written (free space; the broker goes on without a restart)")
	case errors.Is(err, commitlog.ErrClosed):
		return errs.New(errs.Unavailable, "broker is shutting down")
	case errors.Is(err, commitlog.ErrRecordTooLarge):
		return errs.Wrap(errs.TooLarge, err, "record too large")
	}
	return errs.Wrap(errs.Unavailable, err, "storage failed: nothing was written")
}

// applyMessageLocked registers a durably written message: key index, timer
// index, and the wheel when its bucket is loaded.
//
// The latest message of a key is the one latest in the log, i.e. at the
// greatest position: concurrent senders apply in lock order, which is not
// log order, so the key index keeps the greatest position (keyindex.Put),
// live and at replay alike. Put only buffers: the file is written by the
// checkpoint.
func (e *Engine) applyMessageLocked(pos uint64, s *message.Stored, t *topic) {
	if s.Key != "" {
		e.keys.Put(keyHash(s.Topic, s.Key), pos)
	}
	if s.DedupID != "" {
		e.keys.Put(dedupHash(s.Topic, s.DedupID), pos)
	}
	// The forecast counts a message at its timer's time: a windowed
	// message's fire time (window.go), which fire and change take it from.
	ref := messageRef(pos, s, t)
	if s.ForGroup != "" {
		e.cons.noteForGroupLocked(ref, s, t)
	}
	e.disp.addTimerLocked(ref)
	e.side.fc.sent(t.id, ref.due)
	e.segs.addedLocked(pos)
	e.stats.Pending.Add(1)
	t.pending++
	t.sent++
}

// TopicConfig configures a new topic; zero values mean defaults.
type TopicConfig struct {
	// Queues is the number of queues; default Options.DefaultQueues.
	Queues int
	// FIFO hands out messages of one message group one at a time, in order.
	FIFO bool
}

// CreateTopic durably creates a topic. It fails with AlreadyExists if the
// topic exists.
func (e *Engine) CreateTopic(name string, cfg TopicConfig) error {
	_, err := e.cat.createTopic(name, cfg, false)
	return err
}

// createTopic creates a topic; internal is the engine's own creation of a
// dead-letter topic, which may use the reserved prefix and does not count
// against MaxTopics.
func (c *catalog) createTopic(name string, cfg TopicConfig, internal bool) (*topic, error) {
	if err := message.ValidateTopic(name); err != nil {
		return nil, err
	}
	if !internal {
		if err := reservedTopic(name); err != nil {
			return nil, err
		}
	}
	if cfg.Queues == 0 {
		cfg.Queues = c.opts.DefaultQueues
	}
	if cfg.Queues < 1 || cfg.Queues > c.opts.MaxQueues {
		return nil, errs.New(errs.InvalidArgument, "queues %d is not in [1, %d]", cfg.Queues, c.opts.MaxQueues)
	}
	var flags uint8
	if cfg.FIFO {
		flags |= topicFIFO
	}
	// Creators are serialised by createMu, so two creators of one name
	// cannot both append a topic record; the record's fsync and the queue
	// index files are written without mu, so sends, fires and acks of other
	// topics do not wait for them.
	c.createMu.Lock()
	defer c.createMu.Unlock()
	c.gate.RLock()
	defer c.gate.RUnlock()
	c.mu.Lock()
	if err := c.life.unavailableLocked(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if t := c.topic(name); t != nil {
		c.mu.Unlock()
		return t, errs.New(errs.AlreadyExists, "topic %q exists", name)
	}
	if n := c.userTopicsLocked(); !internal && n >= c.opts.MaxTopics {
		c.mu.Unlock()
		return nil, errs.New(errs.ResourceExhausted, "there are %d topics; the limit is %d", n, c.opts.MaxTopics)
	}
	id := c.nextTopicID
	c.mu.Unlock()
	t, err := c.openTopic(id, cfg.Queues, flags, name, nil)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "create topic %q", name)
	}
	if _, err := c.log.Append(encodeTopic(id, cfg.Queues, flags, name)); err != nil {
		t.close()
		return nil, c.life.storageErr(err)
	}
	c.mu.Lock()
	c.installTopicLocked(t)
	c.mu.Unlock()
	c.opts.Logger.Info("topic created", "topic", name, "queues", cfg.Queues, "fifo", cfg.FIFO)
	return t, nil
}

// applyTopicLocked opens a topic's queue indexes and installs it (replay
// and recovery, which run alone).
func (c *catalog) applyTopicLocked(id uint32, queues int, flags uint8, name string, keep []int64) (*topic, error) {
	t, err := c.openTopic(id, queues, flags, name, keep)
	if err != nil {
		return nil, err
	}
	c.installTopicLocked(t)
	return t, nil
}

// userTopicsLocked counts the topics MaxTopics bounds: all but the
// dead-letter topics.
func (c *catalog) userTopicsLocked() int {
	n := 0
	for _, t := range c.topicsByID {
		if !IsDeadLetterTopic(t.name) {
			n++
		}
	}
	return n
}

// installTopicLocked makes an opened topic known.
func (c *catalog) installTopicLocked(t *topic) {
	c.byName.Store(t.name, t)
	c.topicsByID[t.id] = t
	if t.id >= c.nextTopicID {
		c.nextTopicID = t.id + 1
	}
}

func (t *topic) close() {
	for _, q := range t.queues {
		q.Close()
	}
}

// openTopic opens a topic's queue index files (no lock needed: the files
// are the topic's alone). keep is the number of index entries the
// checkpoint recorded per queue (nil: 0 for all).
func (c *catalog) openTopic(id uint32, queues int, flags uint8, name string, keep []int64) (*topic, error) {
	t := &topic{id: id, name: name, fifo: flags&topicFIFO != 0}
	dir := path.Join(c.opts.Dir, "queues", strconv.FormatUint(uint64(id), 10))
	if err := c.opts.FS.MkdirAll(dir); err != nil {
		return nil, err
	}
	for q := 0; q < queues; q++ {
		k := int64(0)
		if q < len(keep) {
			k = keep[q]
		}
		x, err := queueindex.Open(c.opts.FS, path.Join(dir, strconv.Itoa(q)+".qi"), k)
		if err != nil {
			t.close()
			return nil, err
		}
		t.queues = append(t.queues, x)
	}
	return t, nil
}
