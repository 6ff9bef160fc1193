package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Broker is what the runner needs of the engine; *engine.Engine has it.
type Broker interface {
	// Now is the broker clock, Unix ms.
	Now() int64
	SendBatch(ctx context.Context, reqs []engine.SendRequest) ([]engine.Receipt, error)
	LookupKey(topic, key string) (message.ID, error)
	Inspect(id message.ID) (engine.Info, error)
	Cancel(ctx context.Context, id message.ID) error
}

// Options configure a Runner. Zero values take the defaults.
type Options struct {
	// Dir is the journal's directory (the broker uses <data-dir>/schedules).
	Dir string
	// FS is the filesystem; default vfs.OS.
	FS vfs.FS
	// Broker sends the messages and tells the time. Required.
	Broker Broker
	// Clock wakes the runner; it must be the clock Broker's time follows
	// (the engine's Options.Clock), so a virtual clock drives schedules
	// too. Default: the system clock.
	Clock clock.Clock
	// Lead is how long before its fire time a firing is sent, as an
	// ordinary message due at the fire time: the engine's timers then make
	// it visible on time, and the runner's own delays do not add to its
	// lateness. Default 20s: within the engine's near window (its Lookahead,
	// 30 s by default), and enough for 100,000 firings due at one instant
	// on a loaded 2-core machine (docs/benchmarks.md).
	Lead time.Duration
	// MaxBatch bounds the messages of one send; it must not exceed the
	// engine's MaxBatch. Default 1,000.
	MaxBatch int
	// MaxSchedules bounds the number of schedules; default 1,000,000.
	MaxSchedules int
	// MaxBytes bounds what the schedules hold in memory and in the
	// journal: the sum of their messages' sizes (body, key, tag and
	// properties, as message.Limits counts them); default 256 MiB. Without
	// it MaxSchedules schedules of the largest body would be gigabytes.
	MaxBytes int64
	// Limits are the engine's message limits; each schedule's message is
	// checked against them when it is created.
	Limits message.Limits
	// Logger receives the runner's logs; default slog.Default().
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Clock == nil {
		o.Clock = clock.NewReal()
	}
	if o.Lead <= 0 {
		o.Lead = 20 * time.Second
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1000
	}
	if o.MaxSchedules <= 0 {
		o.MaxSchedules = 1_000_000
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 20
	}
	o.Limits = o.Limits.Defaults()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Stats count the runner's work since it started.
type Stats struct {
	// Sent counts firings sent as messages.
	Sent atomic.Uint64
	// Recovered counts firings found already sent after a restart (their
	// progress had not reached the journal): not sent again.
	Recovered atomic.Uint64
	// SendErrors counts firings whose send failed and will be retried.
	SendErrors atomic.Uint64
}

// Info is a schedule as the API shows it.
type Info struct {
	Schedule
	// Next are the next fire times after now (up to 5; none when paused).
	Next []int64
	// LastError is the last failure to send a firing, cleared by a success.
	LastError string
}

// Runner keeps the schedules and sends their firings. Create it with Open;
// its methods are safe for concurrent use.
//
// Locks: opMu serialises every change (a fire batch with its sends and
// journal write, create, pause, resume, delete) and is taken before mu,
// which guards the maps and the heap for short reads and updates. Reads
// (Get, List, Settled) take mu only, so they do not wait for a batch's
// I/O. The journal has its own lock.
type Runner struct {
	opts  Options
	store *Store
	stats Stats

	opMu sync.Mutex
	mu   sync.Mutex
	// Under mu:
	entries map[string]*entry
	byKey   map[string]string // topic and key of every schedule -> its ID (topicKey)
	bytes   int64             // the sum of sizeOf over entries
	due     dueHeap
	firing  bool  // a batch is taken and not yet applied
	failed  error // the journal failed: nothing more is sent

	kick     chan struct{}
	done     chan struct{}
	loopDone chan struct{}
}

// Open reads the journal in opts.Dir, decides what each schedule does
// about fire times missed while the broker was down (its catch-up
// policy), and starts sending.
func Open(opts Options) (*Runner, error) {
	opts.setDefaults()
	if opts.Broker == nil {
		return nil, errors.New("schedule: Options.Broker is required")
	}
	store, all, err := OpenStore(opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	r := &Runner{opts: opts, store: store, entries: map[string]*entry{}, byKey: map[string]string{},
		kick: make(chan struct{}, 1), done: make(chan struct{}), loopDone: make(chan struct{})}
	if err := store.Err(); err != nil {
		// The journal could not be compacted (a full disk): nothing fires
		// until a restart with room, as after any failed journal write.
		r.failed = err
		opts.Logger.Error("schedule journal could not be rewritten at start; schedules stop firing until a restart", "err", err)
	}
	now := opts.Broker.Now()
	for id, sc := range all {
		spec, err := ParseSpec(sc.Cron, sc.TZ)
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("schedule %q in the journal: %w", id, err)
		}
		e := &entry{sc: sc, spec: spec, index: -1, uncertain: true}
		r.addLocked(e)
		if sc.Paused {
			// A pause durably recorded whose cancels of the firings sent
			// ahead may not have happened (a crash, a cancel that failed):
			// do them now (invariant S3).
			if err := r.pause(e, now); err != nil {
				opts.Logger.Warn("schedule: cancelling the firings a paused schedule sent ahead failed; a pause again retries", "schedule", id, "err", err)
			}
			continue
		}
		r.planStart(e, now)
		r.due.set(e)
	}
	go r.loop()
	return r, nil
}

// planStart sets e's first fire after a (re)start at now, applying the
// catch-up policy to fire times that passed while the broker was down.
func (r *Runner) planStart(e *entry, now int64) {
	sc := e.sc
	next := e.spec.Next(sc.Through, sc.Created)
	if next != 0 && next <= now {
		switch sc.CatchUp {
		case CatchUpSkip:
			next = e.spec.Next(now, sc.Created)
		case CatchUpOnce:
			next = lastAtOrBefore(e.spec, next, now, sc.Created)
		}
	}
	e.next = next
	e.due = next - r.opts.Lead.Milliseconds()
}

// lastAtOrBefore returns the last fire time at or before now, given the
// first one, first <= now. It looks back from now over a window that
// doubles until one holds a fire time, then walks forward from that one:
// after a long downtime the cost is a few dozen steps, not one per fire
// time missed (an every-minute schedule down for 180 days took 150 ms
// walking from first, and Open does this for every schedule).
func lastAtOrBefore(s *Spec, first, now, anchor int64) int64 {
	if s.every > 0 {
		d := s.every.Milliseconds()
		return anchor + (now-anchor)/d*d
	}
	t := first
	for w := time.Minute.Milliseconds(); now-w > first; w *= 2 {
		if n := s.Next(now-w, anchor); n != 0 && n <= now {
			t = n
			break
		}
	}
	for {
		n := s.Next(t, anchor)
		if n == 0 || n > now {
			return t
		}
		t = n
	}
}

// Stats returns the runner's counters.
func (r *Runner) Stats() *Stats { return &r.stats }

// Close stops the runner and closes its journal. Firings already sent are
// in the engine; the next Open goes on from the journal.
func (r *Runner) Close() error {
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	<-r.loopDone
	return r.store.Close()
}

// firing is one message of a batch.
type firing struct {
	fire int64
	key  string
	id   string // once sent or found
}

// group is one schedule's firings in a batch, in fire-time order.
type group struct {
	e  *entry
	fs []*firing
	// sendFrom is the first firing to send: those before it were found
	// already sent (after a restart).
	sendFrom int
	err      error
}

// fire sends a batch's firings, records each schedule's progress in the
// journal (one write), and then moves each schedule to its next fire
// time. Called with opMu held.
//
// After a restart a schedule is uncertain: a prefix of its next firings
// may have been sent in a batch whose progress never reached the journal
// (a batch is sent all or nothing, in order). So its firings are looked up
// by key, in order, until the first that is not found; that one and the
// rest are sent, and the schedule is certain again.
func (r *Runner) fire(batch []*group, now int64) {
	var send []*group
	for _, g := range batch {
		if g.e.uncertain {
			for _, f := range g.fs {
				id, ok, err := r.sentBefore(g.e.sc.Topic, f.key)
				if err != nil {
					g.err = err
					break
				}
				if !ok {
					break
				}
				f.id = id
				g.sendFrom++
				r.stats.Recovered.Add(1)
			}
		}
		if g.err == nil && g.sendFrom < len(g.fs) {
			send = append(send, g)
		}
	}
	r.send(send)
	var progress []Progress
	for _, g := range batch {
		if g.err == nil {
			last := g.fs[len(g.fs)-1]
			progress = append(progress, Progress{ID: g.e.sc.ID, Through: last.fire, LastFire: last.fire, LastID: last.id})
		}
	}
	err := r.store.Progress(progress)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.firing = false
	if err != nil {
		// Fail-stop: what was sent is in the engine; after a restart the
		// look-up finds it, so nothing is sent twice.
		r.failed = err
		r.opts.Logger.Error("schedule journal write failed; schedules stop firing until a restart", "err", err)
		return
	}
	for _, g := range batch {
		e := g.e
		if g.err != nil {
			r.stats.SendErrors.Add(uint64(len(g.fs) - g.sendFrom))
			e.failures++
			e.lastErr = g.err.Error()
			backoff := min(time.Second<<min(e.failures-1, 6), time.Minute)
			e.due = now + backoff.Milliseconds()
			r.due.set(e)
			if e.failures == 1 {
				r.opts.Logger.Warn("schedule firing failed; retrying", "schedule", e.sc.ID, "fire", time.UnixMilli(g.fs[0].fire).UTC(), "err", g.err)
			}
			continue
		}
		last := g.fs[len(g.fs)-1]
		sc := e.sc.clone()
		sc.Through, sc.LastFire, sc.LastID = last.fire, last.fire, last.id
		e.sc, e.failures, e.lastErr = sc, 0, ""
		e.uncertain = e.uncertain && g.sendFrom == len(g.fs)
		e.next = e.spec.Next(last.fire, sc.Created)
		e.due = e.next - r.opts.Lead.Milliseconds()
		r.due.set(e)
	}
	if r.store.NeedsCompaction() {
		all := make(map[string]*Schedule, len(r.entries))
		for id, e := range r.entries {
			all[id] = e.sc
		}
		if err := r.store.Compact(all); err != nil {
			r.opts.Logger.Error("schedule journal compaction failed", "err", err)
		}
	}
}

// sentBefore reports whether a live message with key is in topic: a
// firing sent before a crash whose progress was not recorded. A cancelled
// one (by a pause) does not count.
func (r *Runner) sentBefore(topic, key string) (string, bool, error) {
	id, err := r.opts.Broker.LookupKey(topic, key)
	if errors.Is(err, errs.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	info, err := r.opts.Broker.Inspect(id)
	if errors.Is(err, errs.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return id.String(), info.State != engine.StateCancelled, nil
}

// send sends the groups' unsent firings in one batch (all or nothing); if
// the batch is refused for one message's sake, each group is sent alone
// so that one bad schedule does not hold back the others.
func (r *Runner) send(gs []*group) {
	if len(gs) == 0 {
		return
	}
	var reqs []engine.SendRequest
	for _, g := range gs {
		for _, f := range g.fs[g.sendFrom:] {
			reqs = append(reqs, r.request(g.e.sc, f))
		}
	}
	rs, err := r.opts.Broker.SendBatch(context.Background(), reqs)
	if err == nil {
		i := 0
		for _, g := range gs {
			for _, f := range g.fs[g.sendFrom:] {
				f.id = rs[i].ID.String()
				i++
			}
		}
		r.stats.Sent.Add(uint64(len(reqs)))
		return
	}
	if len(gs) == 1 || !errs.PerMessage(err) {
		for _, g := range gs {
			g.err = err
		}
		return
	}
	for _, g := range gs {
		r.send([]*group{g})
	}
}

// request is the message of a firing: the schedule's, with its fire key,
// the two schedule properties, due at the fire time.
func (r *Runner) request(sc *Schedule, f *firing) engine.SendRequest {
	props := make(map[string]string, len(sc.Properties)+2)
	maps.Copy(props, sc.Properties)
	props[PropSchedule] = sc.ID
	props[PropFireTime] = time.UnixMilli(f.fire).UTC().Format("2006-01-02T15:04:05.000Z")
	return engine.SendRequest{
		Message: message.Message{Topic: sc.Topic, Key: f.key, Tag: sc.Tag, Properties: props, Body: sc.Body},
		When:    message.When{At: f.fire},
		// The broker's bookkeeping, not the schedule's: they do not
		// count against the properties a schedule may define.
		SystemProperties: []string{PropSchedule, PropFireTime},
	}
}

// Err returns the failure that stopped every schedule (the journal could
// not be written), or nil. Nothing is sent after it until a restart.
func (r *Runner) Err() error {
	r.mu.Lock()
	failed := r.failed
	r.mu.Unlock()
	if failed != nil {
		return failed
	}
	// A change or a compaction may have stopped the journal first.
	return r.store.Err()
}

// Settled reports whether every firing due at or before t has been sent
// (and none is being sent). A schedule whose sends fail is retried with
// backoff and says why in its last_error; it does not count: a schedule
// whose topic became FIFO, say, fails until it is changed, and would
// otherwise hold back every clock advance for its whole timeout.
func (r *Runner) Settled(t int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.firing {
		return false
	}
	lead := r.opts.Lead.Milliseconds()
	settled := func(e *entry) bool { return e.next > t && e.due > t-lead }
	if len(r.due) == 0 || r.due[0].failures == 0 {
		return len(r.due) == 0 || settled(r.due[0]) // the top is the earliest
	}
	for _, e := range r.due { // rare: only while some schedule fails
		if e.failures == 0 && !settled(e) {
			return false
		}
	}
	return true
}
