package engine

import (
	"iter"
	"sync"

	"github.com/hourglass-mq/hourglass/commitlog"
)

// catalog holds the topics. Guarded by Engine.mu, except createMu, which
// serialises creation (of topics and groups) and is taken before gate, and
// byName, which is read without a lock.
type catalog struct {
	// What it is given at Open: the engine's locks, its options (read-only
	// after Open: limits, and where the queue indexes live), the log a
	// topic record is appended to, and the lifecycle.
	mu       *sync.Mutex
	gate     *ckptGate
	opts     *Options
	log      *commitlog.Log
	life     *lifecycle
	createMu sync.Mutex
	// byName holds the topics by name. It is written under mu
	// (installTopicLocked) and read without it, so that a send finds its
	// topic without queueing for the engine's lock a second time. A topic
	// is never removed: a topic found stays the topic of its name.
	byName      sync.Map // string -> *topic
	topicsByID  map[uint32]*topic
	nextTopicID uint32
}

func newCatalog(mu *sync.Mutex, gate *ckptGate, opts *Options, log *commitlog.Log, life *lifecycle) *catalog {
	return &catalog{mu: mu, gate: gate, opts: opts, log: log, life: life, topicsByID: map[uint32]*topic{}, nextTopicID: 1}
}

// byIDLocked returns the topic with id, or nil.
func (c *catalog) byIDLocked(id uint32) *topic { return c.topicsByID[id] }

// topicsLocked yields every topic, in no order.
func (c *catalog) topicsLocked() iter.Seq[*topic] {
	return func(yield func(*topic) bool) {
		for _, t := range c.topicsByID {
			if !yield(t) {
				return
			}
		}
	}
}

// countLocked is the number of topics, dead-letter topics included.
func (c *catalog) countLocked() int { return len(c.topicsByID) }

// serialiseCreation takes createMu, which serialises the creation of
// topics and groups, and returns its release.
func (c *catalog) serialiseCreation() (release func()) {
	c.createMu.Lock()
	return c.createMu.Unlock
}

// topic returns the topic called name, or nil; no lock needed.
func (c *catalog) topic(name string) *topic {
	if v, ok := c.byName.Load(name); ok {
		return v.(*topic)
	}
	return nil
}
