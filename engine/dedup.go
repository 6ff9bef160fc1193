package engine

// Idempotent sends. A send may carry a dedup ID (message.Message.DedupID).
// While the topic's dedup window holds, a second send with the same ID to
// the same topic stores nothing and answers with the first message's ID and
// due time; one that asks for something else (another body, delivery time,
// key, ...) is a conflict: already_exists naming the first message, or,
// under a first-wins policy, the same answer as a retry.
//
// Where the state lives. Nothing new is durable: the message record carries
// the dedup ID, a hash of what the send asked for and the window it was
// accepted under (message/codec.go, version 3). The index from (topic,
// dedup ID) to the message is the key index itself (keyindex), under a hash
// of its own domain (dedupHash differs from keyHash by its separator byte),
// so it is on disk with about 0.03 B of RAM per entry plus the memtable
// between two checkpoints, checkpointed with the key index, and rebuilt
// from the log with it after a crash or damage. A lookup reads the record
// the index names and trusts only what the record says: the topic and
// dedup ID must match (a 64-bit hash may collide) and the window is the
// record's own.
//
// Order. The key index keeps the greatest position of a hash, and at most
// one message per dedup ID is stored while a window holds, so the entry
// names the latest stored message of the ID: the one whose window counts.
//
// Concurrency. Two concurrent sends of one dedup ID must never both store.
// The index is only written after a send's append, so a lookup alone
// cannot see a send in flight: each send claims its dedup IDs (dedupClaims)
// before the lookup and releases them after its message is applied to the
// index. Claims are taken in hash order, so two batches that share IDs
// cannot wait for each other in a cycle; they are taken before gate and mu
// and held across the append, which no other lock holder waits for.
//
// A cancelled first message still holds its dedup ID for a time window
// (the send happened; a retry must not make a second one), but ends an
// "until delivered" window, as nothing will be delivered.
//
// Expiry. An entry expires logically when its window ends: the record's
// Sent + DedupWindow, or for DedupUntilDelivered when the message becomes
// visible or is cancelled. It goes physically when retention deletes the
// message's segment (merges of the key index drop entries below the log's
// start): a window longer than Retention ends with the record.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/message"
)

// DefaultDedupWindow is how long a dedup ID holds unless configured.
const DefaultDedupWindow = 24 * time.Hour

// DedupPolicy configures idempotent sends for a topic.
type DedupPolicy struct {
	// Window is how long after a message is accepted its dedup ID holds;
	// default DefaultDedupWindow.
	Window time.Duration
	// UntilDelivered makes the dedup ID hold until the message becomes
	// visible to consumers (or is cancelled), whatever Window says.
	UntilDelivered bool
	// FirstWins answers a conflicting send (same dedup ID, different
	// content) like a retry, with the first message's receipt, instead of
	// already_exists.
	FirstWins bool
}

// windowMs is the DedupWindow a message accepted under p carries.
func (p DedupPolicy) windowMs() int64 {
	switch {
	case p.UntilDelivered:
		return message.DedupUntilDelivered
	case p.Window > 0:
		return p.Window.Milliseconds()
	}
	return DefaultDedupWindow.Milliseconds()
}

// dedupPolicy is the policy of a topic.
func (o *Options) dedupPolicy(topic string) DedupPolicy {
	if p, ok := o.DedupTopics[topic]; ok {
		return p
	}
	return o.Dedup
}

// dedupHash identifies a (topic, dedup ID) pair in the key index; the
// separator keeps it apart from keyHash's domain.
func dedupHash(topic, id string) uint64 { return hash64(topic + "\x01" + id) }

// requestHash identifies what a send asked for: everything but the dedup
// ID and the broker's own choices. The delivery options are hashed as
// given, not as resolved, so a retry of "in 30 minutes" matches the first
// send although the clock moved. Properties named in ignore do not count.
func requestHash(m *message.Message, w message.When, ignore []string) uint64 {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		h.Write(binary.LittleEndian.AppendUint64(n[:0], uint64(len(b))))
		h.Write(b)
	}
	num := func(v int64) { h.Write(binary.LittleEndian.AppendUint64(n[:0], uint64(v))) }
	field(m.Body)
	field([]byte(m.Key))
	field([]byte(m.Tag))
	field([]byte(m.Group))
	names := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		if !slices.Contains(ignore, k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	num(int64(len(names)))
	for _, k := range names {
		field([]byte(k))
		field([]byte(m.Properties[k]))
	}
	for _, v := range []int64{int64(w.Delay), w.At, int64(w.Level), w.Deadline, int64(w.TTL), int64(w.Window)} {
		num(v)
	}
	return binary.LittleEndian.Uint64(h.Sum(nil))
}

// dedupClaims are the dedup IDs (as dedupHash) of sends in flight, each
// with a channel closed when its send is done. It has its own lock, taken
// alone.
type dedupClaims struct {
	mu   sync.Mutex
	held map[uint64]chan struct{}
	// What the checks read, given by init once recovery opened the key
	// index: the engine's lock (engMu, for a message's state), options
	// (read-only after Open), key index, sealers and stats, and where a
	// first message and its state are found: the log, the segment table,
	// the overlay and the dispatcher.
	engMu *sync.Mutex
	opts  *Options
	keys  *keyindex.Index
	ids   *idents
	stats *Stats
	log   *commitlog.Log
	segs  *segTable
	ovl   *overlayState
	disp  *dispatcher
}

// init gives the dedup check what it reads; Open calls it after recovery,
// before any send.
func (c *dedupClaims) init(engMu *sync.Mutex, opts *Options, keys *keyindex.Index, ids *idents, stats *Stats,
	log *commitlog.Log, segs *segTable, ovl *overlayState, disp *dispatcher) {
	c.engMu, c.opts, c.keys, c.ids, c.stats = engMu, opts, keys, ids, stats
	c.log, c.segs, c.ovl, c.disp = log, segs, ovl, disp
}

// claim takes hs (sorted and unique) in order, waiting for each held one
// to be released. It returns the release of what it took.
func (c *dedupClaims) claim(ctx context.Context, hs []uint64) (func(), error) {
	got := 0
	release := func() {
		c.mu.Lock()
		for _, h := range hs[:got] {
			close(c.held[h])
			delete(c.held, h)
		}
		c.mu.Unlock()
	}
	for _, h := range hs {
		for {
			c.mu.Lock()
			if c.held == nil {
				c.held = map[uint64]chan struct{}{}
			}
			ch := c.held[h]
			if ch == nil {
				c.held[h] = make(chan struct{})
				c.mu.Unlock()
				break
			}
			c.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				release()
				return nil, ctx.Err()
			}
		}
		got++
	}
	return release, nil
}

// dedupPlan is what the dedup check decided for a batch: for each request,
// either store it (dup[i] nil and ref[i] < 0), answer with an earlier
// stored message (dup[i]), or answer like request ref[i] of the batch.
type dedupPlan struct {
	dup []*Receipt
	ref []int
}

// stores reports whether request i is stored.
func (p *dedupPlan) stores(i int) bool { return p == nil || p.dup[i] == nil && p.ref[i] < 0 }

// dedupCheck claims the dedup IDs of a batch and decides, for each
// request, whether it repeats a message whose window still holds. It
// returns nil when no request has a dedup ID. The caller must call
// release once its stored messages are applied (or it gave up).
func (dc *dedupClaims) dedupCheck(ctx context.Context, stored []*message.Stored, now int64) (*dedupPlan, func(), error) {
	var hs []uint64
	for _, s := range stored {
		if s.DedupID != "" {
			hs = append(hs, dedupHash(s.Topic, s.DedupID))
		}
	}
	if len(hs) == 0 {
		return nil, func() {}, nil
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	release, err := dc.claim(ctx, hs)
	if err != nil {
		return nil, nil, err
	}
	p := &dedupPlan{dup: make([]*Receipt, len(stored)), ref: make([]int, len(stored))}
	first := map[uint64]int{} // dedup hash -> first request of the batch that stores it
	for i, s := range stored {
		p.ref[i] = -1
		if s.DedupID == "" {
			continue
		}
		h := dedupHash(s.Topic, s.DedupID)
		if j, ok := first[h]; ok {
			if stored[j].DedupID == s.DedupID {
				if stored[j].DedupHash != s.DedupHash && !dc.opts.dedupPolicy(s.Topic).FirstWins {
					release()
					return nil, nil, batchErr(len(stored), i, errs.New(errs.AlreadyExists,
						"dedup_id %q repeats message %d of this batch with a different body or delivery time", s.DedupID, j))
				}
				p.ref[i] = j
				continue
			}
		}
		rc, err := dc.findDedup(s, h, now)
		if err != nil {
			release()
			return nil, nil, batchErr(len(stored), i, err)
		}
		if rc != nil {
			p.dup[i] = rc
			continue
		}
		if _, ok := first[h]; !ok {
			first[h] = i
		}
	}
	return p, release, nil
}

// findDedup looks for the message whose dedup window s falls in. It
// returns its receipt (Duplicate set) when s repeats it, an AlreadyExists
// error naming it when s conflicts with it, and nil when there is none.
func (dc *dedupClaims) findDedup(s *message.Stored, h uint64, now int64) (*Receipt, error) {
	pos, ok, err := dc.keys.Get(h)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "dedup_id %q could not be looked up", s.DedupID)
	}
	if !ok {
		return nil, nil
	}
	first, _, err := readStoredFrom(dc.engMu, dc.segs, dc.log, pos)
	switch {
	case errors.Is(err, errGone) || isNotARecord(err):
		return nil, nil // removed by retention: its window has ended
	case err != nil:
		return nil, errs.Wrap(errs.Unavailable, err, "dedup_id %q: the first message could not be read", s.DedupID)
	case first.Topic != s.Topic || first.DedupID != s.DedupID:
		return nil, nil // another ID of the same hash
	}
	dc.engMu.Lock()
	st, due, _ := messageStateLocked(dc.ovl, dc.disp, pos, first)
	dc.engMu.Unlock()
	live := now < first.Sent+first.DedupWindow
	if first.DedupWindow == message.DedupUntilDelivered {
		live = st == StatePending || st == StateDue
	}
	if !live {
		return nil, nil
	}
	id := dc.ids.seal.ID(pos, first.Nonce)
	if first.DedupHash != s.DedupHash && !dc.opts.dedupPolicy(s.Topic).FirstWins {
		dc.stats.DedupConflicts.Add(1)
		return nil, &errs.Error{Code: errs.AlreadyExists, Ref: id.String(),
			Msg: "dedup_id " + strconv.Quote(s.DedupID) + " was used by message " + id.String() + " with a different body or delivery time"}
	}
	dc.stats.DedupHits.Add(1)
	return &Receipt{ID: id, Topic: first.Topic, Queue: first.Queue, Due: due, Duplicate: true}, nil
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// keyHash identifies a (topic, key) pair in the key index.
func keyHash(topic, key string) uint64 { return hash64(topic + "\x00" + key) }
