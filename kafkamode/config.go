package kafkamode

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Config configures a Worker. Start from DefaultConfig; Brokers is required.
type Config struct {
	// Brokers are the seed brokers, host:port each.
	Brokers []string
	// DelayTopic is the topic producers write delayed records to.
	DelayTopic string
	// DLQTopic receives records whose control headers are missing or bad.
	// Empty means DelayTopic + ".dlq".
	DLQTopic string
	// StateTopic holds the progress above the committed offsets
	// (snapshots and resolution records; compacted). It must have at least
	// as many partitions as DelayTopic: the state of delay partition p
	// lives in state partition p. Empty means DelayTopic + ".state".
	StateTopic string
	// Group is the consumer group the workers share; it also holds the
	// committed progress (see the package doc).
	Group string
	// WorkerID names this worker; the transactional ID is Group + "-" +
	// WorkerID. Give a restarted worker its old ID: its first transaction
	// then fences (aborts) what the crashed one left open at once, rather
	// than after TxnTimeout. Two live workers must never share an ID:
	// they fence each other, and Run returns an error in the one fenced
	// while the other is a member of the group (checkFenced).
	WorkerID string
	// Partitions and Replication are used when the worker creates a missing
	// topic (delay, state, dead-letter). Replication -1 is the broker's
	// default.
	Partitions  int32
	Replication int16
	// BodyLead is how long before its due time a record's body is fetched
	// again when the worker dropped it at read time; records read within
	// BodyLead of their due time keep their body. Zero means 3 s.
	BodyLead time.Duration
	// MaxBatch bounds the records forwarded in one transaction. Zero means
	// 5,000.
	MaxBatch int
	// SessionTimeout is the group session timeout: how long a crashed
	// worker holds its partitions. Zero means 10 s. The broker refuses a
	// value outside its group.min.session.timeout.ms (6 s by default) and
	// group.max.session.timeout.ms (30 min).
	SessionTimeout time.Duration
	// StaticMember makes the worker a static member of the group
	// (KIP-345): its group.instance.id is WorkerID. A worker restarted
	// with the same WorkerID within SessionTimeout (a supervisor's
	// restart, after a crash or a SIGTERM) gets its partitions back with
	// no rebalance: no other worker pauses, and its own partitions wait
	// only for its restart. The price: a static member does not leave
	// the group when it stops, so a worker stopped for good holds its
	// partitions for SessionTimeout, as a crashed one does. Off by
	// default; two live workers must then never share a WorkerID.
	StaticMember bool
	// Delivery is DeliveryExactlyOnce (the default, "") or
	// DeliveryAtLeastOnce (see there).
	Delivery string
	// TxnTimeout is the transaction timeout: the longest a transaction a
	// worker left open blocks read_committed consumers. A crashed
	// worker's is fenced sooner: by its restart with the same WorkerID,
	// or, when it stays dead, by the other workers at the rebalance after
	// its SessionTimeout (fenceDeparted). Zero means 10 s.
	TxnTimeout time.Duration
	// SnapshotInterval is how often the worker writes a snapshot of each
	// owned partition's pending index to the state topic (in a
	// transaction with the offset commit). A worker taking a partition
	// over re-reads the delay partition only from the latest snapshot's
	// read position, so this bounds the take-over's reading. Zero means
	// 30 s.
	SnapshotInterval time.Duration
	// NearWindow is how far ahead the worker keeps pending entries in
	// RAM: an entry due later goes to a local time-bucket file (SpillDir)
	// and comes back when its bucket (half a window wide) enters the
	// window, so RAM grows with the messages due within about 1.5 windows,
	// not with all pending ones. It must exceed BodyLead. Zero means 2
	// minutes.
	NearWindow time.Duration
	// SpillDir is where the spill files go: the worker uses (and empties
	// at start, removes at a clean exit) a directory of its own in it,
	// named after Group and WorkerID. The files are a cache of what Kafka
	// holds: losing them loses nothing. Empty means a new temporary
	// directory, removed at a clean exit.
	SpillDir string
	// SpillFS is the filesystem the spill files are written through; nil
	// means the operating system's (tests inject faults with vfs.Faulty).
	SpillFS vfs.FS
	// Logger receives the worker's log; nil discards it.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: delay topic hourglass.delay, group
// hourglass, 8 partitions for topics the worker creates, and a worker ID of
// the host name and process ID.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	return Config{
		DelayTopic:  "hourglass.delay",
		Group:       "hourglass",
		WorkerID:    fmt.Sprintf("%s-%d", host, os.Getpid()),
		Partitions:  8,
		Replication: -1,
	}
}

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if len(c.Brokers) == 0 {
		return c, errors.New("kafka mode: no brokers given (host:port,...)")
	}
	for _, b := range c.Brokers {
		if !strings.Contains(b, ":") {
			return c, fmt.Errorf("kafka mode: broker %q is not host:port", b)
		}
	}
	if err := validTopic(c.DelayTopic); err != nil {
		return c, fmt.Errorf("kafka mode: delay topic: %v", err)
	}
	if c.DLQTopic == "" {
		c.DLQTopic = c.DelayTopic + ".dlq"
	}
	if c.StateTopic == "" {
		c.StateTopic = c.DelayTopic + ".state"
	}
	for name, t := range map[string]string{"dead-letter topic": c.DLQTopic, "state topic": c.StateTopic} {
		if err := validTopic(t); err != nil {
			return c, fmt.Errorf("kafka mode: %s: %v", name, err)
		}
		if t == c.DelayTopic {
			return c, fmt.Errorf("kafka mode: the %s must differ from the delay topic", name)
		}
	}
	if c.DLQTopic == c.StateTopic {
		return c, errors.New("kafka mode: the dead-letter and state topics must differ")
	}
	if c.Group == "" {
		return c, errors.New("kafka mode: the group must not be empty")
	}
	if c.WorkerID == "" {
		return c, errors.New("kafka mode: the worker ID must not be empty")
	}
	if err := plainName(c.Group); err != nil {
		return c, fmt.Errorf("kafka mode: the group %s", err)
	}
	if err := plainName(c.WorkerID); err != nil {
		return c, fmt.Errorf("kafka mode: the worker ID %s", err)
	}
	if n := len(c.Group) + len(c.WorkerID); n > maxGroupAndWorkerID {
		return c, fmt.Errorf("kafka mode: the group and the worker ID are %d bytes together; at most %d: they name the worker's Kafka client (and its transactional ID)",
			n, maxGroupAndWorkerID)
	}
	if c.Partitions < 1 {
		return c, fmt.Errorf("kafka mode: partitions %d must be at least 1", c.Partitions)
	}
	if c.Replication == 0 || c.Replication < -1 {
		return c, fmt.Errorf("kafka mode: replication %d must be -1 (broker default) or at least 1", c.Replication)
	}
	if c.BodyLead < 0 || c.MaxBatch < 0 || c.SessionTimeout < 0 || c.TxnTimeout < 0 || c.SnapshotInterval < 0 {
		return c, errors.New("kafka mode: durations and sizes must not be negative")
	}
	orDefault(&c.BodyLead, 3*time.Second)
	orDefault(&c.MaxBatch, 5000)
	orDefault(&c.SessionTimeout, 10*time.Second)
	orDefault(&c.TxnTimeout, 10*time.Second)
	orDefault(&c.SnapshotInterval, 30*time.Second)
	if c.NearWindow < 0 {
		return c, errors.New("kafka mode: the near window must not be negative")
	}
	orDefault(&c.NearWindow, 2*time.Minute)
	orDefault(&c.Delivery, DeliveryExactlyOnce)
	if c.Delivery != DeliveryExactlyOnce && c.Delivery != DeliveryAtLeastOnce {
		return c, fmt.Errorf("kafka mode: delivery %q: want %q or %q", c.Delivery, DeliveryExactlyOnce, DeliveryAtLeastOnce)
	}
	if c.NearWindow <= c.BodyLead {
		return c, fmt.Errorf("kafka mode: the near window (%v) must exceed the body lead (%v): a spilled entry must be back in RAM before its body is fetched", c.NearWindow, c.BodyLead)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// plainName checks a group or worker ID: they name the worker's
// transactional ID, its group membership and its spill directory, and
// appear in its log, so a control character (a newline forging a log
// line, an escape sequence) or invalid UTF-8 is refused, and so is
// leading or trailing white space, which would make "w1 " a worker other
// than "w1" (two workers meant to be one, or a restart that fences
// nothing).
func plainName(v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%q is not UTF-8", v)
	}
	if strings.TrimSpace(v) != v {
		return fmt.Errorf("%q begins or ends with white space", v)
	}
	for _, r := range v {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%q has the unprintable character %U", v, r)
		}
	}
	return nil
}

// maxClientID is the longest client ID the Kafka client takes; the
// worker's is its transactional ID (group "-" worker ID) and a nonce
// (memberClientID).
const maxClientID = 256

// maxGroupAndWorkerID is the longest group and worker ID together whose
// member client ID (group "-" worker ID "~" nonce) fits maxClientID.
const maxGroupAndWorkerID = maxClientID - len("-~") - nonceLen

// The delivery modes (Config.Delivery).
const (
	// DeliveryExactlyOnce forwards each record in the transaction that
	// commits its progress: a read_committed consumer sees it once, when
	// that transaction has completed.
	DeliveryExactlyOnce = "exactly-once"
	// DeliveryAtLeastOnce forwards with the idempotent producer and
	// commits the progress in a transaction after the forwards are
	// acknowledged, at most every 50 ms: a consumer sees a forward as
	// soon as Kafka has it, one transaction sooner. A worker that crashes (or loses its
	// partitions) between the two leaves forwards whose progress is not
	// committed; the next owner forwards them again, with
	// HeaderRedelivery. Never early either way.
	DeliveryAtLeastOnce = "at-least-once"
)

// atLeastOnce reports whether the worker forwards before it commits.
func (c Config) atLeastOnce() bool { return c.Delivery == DeliveryAtLeastOnce }

// orDefault sets *p to def when it holds the zero value.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
