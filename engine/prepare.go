package engine

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// prepareBatch validates a batch's requests and makes their stored form
// and topics, before anything is appended. It runs in two passes so that a
// refused batch leaves nothing behind: the first checks every request
// against what exists (a topic is only looked up), the second creates the
// topics the batch names that do not exist yet (auto-create), and only
// then are queues picked. internal lets the engine's own sends (a
// redrive) reach the reserved dead-letter namespace. now and wall are one
// reading of the broker clock (clock.Broker.NowWall).
func (e *Engine) prepareBatch(reqs []SendRequest, now, wall int64, internal bool) ([]*message.Stored, []*topic, error) {
	stored := make([]*message.Stored, len(reqs))
	tops := make([]*topic, len(reqs))
	var missing []string // topic names to create, each once
	var last *topic      // a batch usually goes to one topic: look it up once
	for i := range reqs {
		s, t, err := e.checkRequest(&reqs[i], now, wall, internal, last)
		if err != nil {
			return nil, nil, batchErr(len(reqs), i, err)
		}
		if t != nil {
			last = t
		}
		if t == nil && !slices.Contains(missing, s.Topic) {
			missing = append(missing, s.Topic)
		}
		stored[i], tops[i] = s, t
	}
	if len(missing) > 0 {
		if err := e.cat.createMissing(reqs, stored, tops, missing); err != nil {
			return nil, nil, err
		}
	}
	for i, s := range stored {
		s.Queue = pickQueue(tops[i], &reqs[i].Message)
	}
	return stored, tops, nil
}

// Room the engine's own sends get beyond the limits, for the properties it
// adds to a client's message: at most 5 (a dead letter's 4 and a
// redrive's source), names and values of at most a topic name, an ID and
// a few words each; and for the properties an adapter added to the
// message it copies, which its copy counts as the sender's.
const (
	internalProperties  = 8 + message.MaxSystemProperties
	internalHeaderBytes = 2048
)

// checkRequest validates one request and makes its stored form, without
// its queue. Its topic is nil when it does not exist yet (and auto-create
// is on); last, if not nil, is the previous request's, reused when the
// names match.
func (e *Engine) checkRequest(r *SendRequest, now, wall int64, internal bool, last *topic) (*message.Stored, *topic, error) {
	lim := e.opts.Limits
	if internal {
		// The engine's own sends (a redrive) carry a client's message
		// plus the properties the engine added (a dead letter's origin,
		// attempts and reason, the redrive's source): a message at the
		// limits must not be refused for them.
		lim.MaxProperties += internalProperties
		lim.MaxHeaderBytes = 2*lim.MaxHeaderBytes + internalHeaderBytes // an adapter's budget too
	}
	if err := lim.ValidateSystem(&r.Message, r.SystemProperties); err != nil {
		return nil, nil, err
	}
	// An absolute time while the broker clock holds is due when it
	// moves again, never early by either clock (DueAtHeld).
	due, err := e.opts.Limits.DueAtHeld(r.When, now, wall)
	if err != nil {
		return nil, nil, err
	}
	name := r.Message.Topic
	if err := message.ValidateTopic(name); err != nil {
		return nil, nil, err
	}
	if !internal {
		if err := reservedTopic(name); err != nil {
			return nil, nil, err
		}
	}
	t := last
	if t == nil || t.name != name {
		t = e.cat.topic(name)
	}
	if t == nil && e.opts.NoAutoCreate {
		return nil, nil, errs.New(errs.NotFound, "topic %q does not exist (auto-create is off)", name)
	}
	if err := e.cons.checkForGroup(r, t); err != nil {
		return nil, nil, err
	}
	s := &message.Stored{Message: r.Message, Due: due, Sent: now, Nonce: e.ids.nonce.Add(1), ForGroup: r.ForGroup}
	if err := e.opts.schedulingFields(s, r, now); err != nil {
		return nil, nil, heldHint(err, now, wall)
	}
	if t != nil {
		if err := fifoChecks(t, r); err != nil {
			return nil, nil, err
		}
	}
	return s, t, nil
}

// createMissing creates the batch's new topics (auto-create) and gives
// their requests the topic, checked as checkRequest checks an existing one
// (another client may have created it first, as FIFO).
func (c *catalog) createMissing(reqs []SendRequest, stored []*message.Stored, tops []*topic, missing []string) error {
	first := func(name string) int { // the index of the first request naming it
		return slices.IndexFunc(stored, func(s *message.Stored) bool { return s.Topic == name })
	}
	// Room for all of them, or none is created (another creator may still
	// take the room meanwhile: then the batch fails with topics made).
	// Only the names still missing count: another sender may have made
	// one since the batch was checked.
	c.mu.Lock()
	n := c.userTopicsLocked()
	var still []string
	for _, name := range missing {
		if c.topic(name) == nil {
			still = append(still, name)
		}
	}
	c.mu.Unlock()
	if n+len(still) > c.opts.MaxTopics {
		return batchErr(len(reqs), first(still[max(0, c.opts.MaxTopics-n)]), errs.New(errs.ResourceExhausted,
			"there are %d topics; the limit is %d, and the batch names %d new ones", n, c.opts.MaxTopics, len(still)))
	}
	byName := make(map[string]*topic, len(missing))
	for _, name := range missing {
		t, err := c.topicFor(name)
		if err != nil {
			return batchErr(len(reqs), first(name), err)
		}
		byName[name] = t
	}
	for i, s := range stored {
		if tops[i] != nil {
			continue
		}
		tops[i] = byName[s.Topic]
		if err := fifoChecks(tops[i], &reqs[i]); err != nil {
			return batchErr(len(reqs), i, err)
		}
	}
	return nil
}

// topicFor returns the topic, creating it durably when auto-create is on.
// The caller has validated the name and checked the reserved namespace.
func (c *catalog) topicFor(name string) (*topic, error) {
	if t := c.topic(name); t != nil {
		return t, nil
	}
	if c.opts.NoAutoCreate {
		return nil, errs.New(errs.NotFound, "topic %q does not exist (auto-create is off)", name)
	}
	t, err := c.createTopic(name, TopicConfig{}, false)
	if errs.CodeOf(err) == errs.AlreadyExists {
		return c.topic(name), nil
	}
	return t, err
}

// fifoChecks refuses what a FIFO topic cannot take: a message without a
// message group, or a tolerance window, which would let a message overtake
// an earlier one of its group.
func fifoChecks(t *topic, r *SendRequest) error {
	if !t.fifo {
		return nil
	}
	if r.Message.Group == "" {
		return errs.New(errs.InvalidArgument, "topic %q is FIFO: a message group is required", t.name)
	}
	if r.When.Window > 0 {
		return errs.New(errs.InvalidArgument, "topic %q is FIFO: a tolerance window would let a message overtake an earlier one of its group", t.name)
	}
	return nil
}

// heldHint adds to a refused send, while the broker clock holds (wall <
// now), why a time ahead by the wall clock counts as past: a deadline
// between the two is before the due time the broker can give.
func heldHint(err error, now, wall int64) error {
	var he *errs.Error
	if wall >= now || !errors.As(err, &he) {
		return err
	}
	msg := fmt.Sprintf("%s; the broker's clock holds at %s, %v ahead of the wall clock, which stepped back: it moves again when the wall clock reaches it",
		he.Msg, fmtMs(now), time.Duration(now-wall)*time.Millisecond)
	return &errs.Error{Code: he.Code, Msg: msg, Err: he.Err, Ref: he.Ref}
}

// schedulingFields validates and fills in what a send asks beyond its due
// time: dedup ID, deadline and tolerance window.
func (o *Options) schedulingFields(s *message.Stored, r *SendRequest, now int64) error {
	if err := message.ValidateDedupID(s.DedupID); err != nil {
		return err
	}
	if s.DedupID != "" {
		s.DedupHash = requestHash(&r.Message, r.When, r.DedupIgnore)
		s.DedupWindow = o.dedupPolicy(s.Topic).windowMs()
	}
	var err error
	s.Deadline, s.Window, err = o.Limits.Expiry(r.When, s.Due, now)
	return err
}

func batchErr(n, i int, err error) error {
	if n == 1 {
		return err
	}
	var he *errs.Error
	if errors.As(err, &he) {
		return &errs.Error{Code: he.Code, Msg: "message " + strconv.Itoa(i) + ": " + he.Msg, Err: he.Err, Ref: he.Ref}
	}
	return err
}

// pickQueue spreads messages over queues: by group or key when given, so one
// group's messages stay in one queue (and in order), else round robin.
func pickQueue(t *topic, m *message.Message) int {
	n := len(t.queues)
	if n == 1 {
		return 0
	}
	switch {
	case m.Group != "":
		return int(hash64(m.Group) % uint64(n))
	case m.Key != "":
		return int(hash64(m.Key) % uint64(n))
	}
	return int(t.rr.Add(1) % uint32(n))
}
