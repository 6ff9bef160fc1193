package engine

import (
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// Consumer groups: each group of a topic receives every message of the
// topic once (at least once). A receive hands out visible messages under a
// lease (an invisibility duration); an ack ends them; a lease that ends
// unacknowledged, or a nack, brings the message back after a backoff through
// the engine's timing wheel; after MaxAttempts deliveries it moves to the
// group's dead-letter topic.
//
// Durable: group creation, acks and delivery attempts are commit-log
// records, and the checkpoint holds each group queue's progress. Not
// durable: leases and backoffs. After a crash every message that was in
// flight is handed out again at once, with its attempt count kept: that is
// the documented redelivery window of at-least-once.

// Limits of Receive.
const (
	MaxReceive       = 1000
	MaxInvisible     = 12 * time.Hour
	MaxReceiveWait   = 30 * time.Second
	DefaultReceive   = 32
	DefaultInvisible = 30 * time.Second
)

// GroupConfig configures a consumer group; zero values mean defaults.
type GroupConfig struct {
	// MaxAttempts is how many deliveries a message gets before it moves to
	// the dead-letter topic; default 16.
	MaxAttempts int
	// BackoffBase is the wait before the second delivery; each further
	// attempt doubles it; default 1s.
	BackoffBase time.Duration
	// BackoffMax caps the backoff; default 5m.
	BackoffMax time.Duration
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c GroupConfig) WithDefaults() GroupConfig {
	c.setDefaults()
	return c
}

func (c *GroupConfig) setDefaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 16
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 5 * time.Minute
	}
}

func (c GroupConfig) validate() error {
	switch {
	case c.MaxAttempts < 1 || c.MaxAttempts > 1000:
		return errs.New(errs.InvalidArgument, "max attempts %d is not in [1, 1000]", c.MaxAttempts)
	case c.BackoffBase < time.Millisecond || c.BackoffBase > time.Hour:
		return errs.New(errs.InvalidArgument, "backoff base %v is not in [1ms, 1h]", c.BackoffBase)
	case c.BackoffMax < c.BackoffBase || c.BackoffMax > 24*time.Hour:
		return errs.New(errs.InvalidArgument, "backoff max %v is not in [backoff base, 24h]", c.BackoffMax)
	}
	return nil
}

// Backoff returns the wait after the attempt-th delivery failed: BackoffBase
// doubled for each attempt after the first, at most BackoffMax.
func (c GroupConfig) Backoff(attempt uint32) time.Duration {
	d := c.BackoffBase
	for i := uint32(1); i < attempt && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// group is one consumer group of one topic.
type group struct {
	id     uint32
	name   string
	topic  *topic
	cfg    GroupConfig
	dlq    string
	queues []*groupQueue
	rr     int
	// internal marks the engine's own group (the redrive's reader of a
	// dead-letter topic): left out wherever users see groups.
	internal bool
	// paused stops its receives from handing out anything (GroupAdmin).
	paused bool
	// Counters, under mu.
	delivered, acked, redelivered, deadLettered uint64
}

func groupKey(topic, name string) string { return topic + "\x00" + name }

// CreateGroup durably creates a consumer group of a topic; it starts at
// the first message of every queue.
func (e *Engine) CreateGroup(topic, name string, cfg GroupConfig) error {
	_, err := e.cons.createGroup(topic, name, cfg, false, false)
	return err
}

// createGroup creates a group, or returns it when it exists and existingOK.
// internal is the engine's own group (a redrive's reader of a dead-letter
// topic, one a dead-letter topic): it is not refused by MaxGroups or a
// dead-letter name that collides, so a redrive never strands dead letters.
func (c *consumers) createGroup(topicName, name string, cfg GroupConfig, existingOK, internal bool) (*group, error) {
	if err := message.ValidateTopic(topicName); err != nil {
		return nil, err
	}
	if err := message.ValidateName("group", name); err != nil {
		return nil, err
	}
	if !internal && isEngineGroup(topicName, name) {
		// Before the look-up below: a client must not reach the engine's
		// own group, which exists once a redrive ran.
		return nil, errs.New(errs.InvalidArgument, "group %q of a dead-letter topic is reserved for the broker's redrive; choose another name", name)
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// A receive's case, the group exists, takes no lock; the checks of an
	// engine that failed or closed are the receive's next step under mu.
	// CreateGroup has no such step: it takes mu below, so that a closed
	// engine answers Unavailable, not AlreadyExists.
	if existingOK {
		if g := c.group(topicName, name); g != nil {
			return g, nil
		}
	}
	// The engine's own redrive group reads a dead-letter topic whose name
	// may already be near the limit; it acks what it reads at once, so its
	// own dead-letter name is never needed.
	if err := message.ValidateTopic(DeadLetterTopic(topicName, name)); err != nil && !internal {
		return nil, errs.New(errs.InvalidArgument, "topic and group names together are too long for the dead-letter topic")
	}
	c.mu.Lock()
	if err := c.life.unavailableLocked(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if g := c.group(topicName, name); g != nil {
		c.mu.Unlock()
		if existingOK {
			return g, nil
		}
		return g, errs.New(errs.AlreadyExists, "group %q of topic %q exists", name, topicName)
	}
	c.mu.Unlock()
	// Creation: serialised by createMu, the record's fsync without mu (see
	// createTopic).
	defer c.cat.serialiseCreation()()
	c.gate.RLock()
	defer c.gate.RUnlock()
	c.mu.Lock()
	t := c.cat.topic(topicName)
	g := c.group(topicName, name)
	id := c.nextIDLocked()
	c.mu.Unlock()
	switch {
	case t == nil:
		return nil, errs.New(errs.NotFound, "topic %q does not exist; create it first (PUT /v1/topics/{topic}, hourglass topics create)", topicName)
	case g != nil && existingOK:
		return g, nil
	case g != nil:
		return g, errs.New(errs.AlreadyExists, "group %q of topic %q exists", name, topicName)
	}
	if !internal {
		if err := c.roomForGroup(topicName, name); err != nil {
			return nil, err
		}
	}
	if _, err := c.log.Append(encodeGroup(id, t.id, cfg, name)); err != nil {
		return nil, c.life.storageErr(err)
	}
	c.mu.Lock()
	g = c.installLocked(id, t, cfg, name)
	c.mu.Unlock()
	c.opts.Logger.Info("group created", "topic", topicName, "group", name)
	return g, nil
}

// topicForGroup creates the topic of an operator's new group when it does
// not exist, as a send to it would, so that a group and its policy can be
// set up before the first message; with NoAutoCreate it does nothing (and
// the creation answers NotFound, saying how to create the topic). Only an
// explicit creation does this: a receive of an unknown topic still
// answers NotFound, and creates nothing.
func (c *consumers) topicForGroup(topicName string) error {
	if c.opts.NoAutoCreate || c.cat.topic(topicName) != nil { // no lock: see catalog.byName
		return nil
	}
	_, err := c.cat.createTopic(topicName, TopicConfig{}, false)
	if errs.CodeOf(err) == errs.AlreadyExists {
		return nil
	}
	return err
}

// roomForGroup refuses a new group past MaxGroups, or one whose
// dead-letter topic would be another group's (DeadLetterTopic). The caller
// holds createMu, so no other group appears meanwhile.
func (c *consumers) roomForGroup(topicName, name string) error {
	dlq := DeadLetterTopic(topicName, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.userGroupsLocked(); n >= c.opts.MaxGroups {
		return errs.New(errs.ResourceExhausted, "there are %d groups; the limit is %d", n, c.opts.MaxGroups)
	}
	var err error
	c.eachLocked(func(o *group) {
		if err == nil && o.dlq == dlq {
			err = errs.New(errs.FailedPrecondition, "group %q of topic %q would share its dead-letter topic %q with group %q of topic %q; choose another group name", name, topicName, dlq, o.name, o.topic.name)
		}
	})
	return err
}
