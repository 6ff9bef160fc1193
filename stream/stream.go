// Package stream is a consumer's pipelined receive: it leases a group's
// messages ahead of the consumer's acks, up to a window of messages leased
// through the stream and not yet acked through it, so that the next batch
// is on its way while the consumer works on the last one.
//
// A request/response consumer (receive, work, receive with the acks) has
// one batch in flight: every batch waits for its own round trip and its own
// commit-log fsync, and over HTTP the consumers' requests reach the group
// commit one or two at a time (BenchmarkReceiveAck8 in package server). A
// stream splits the two directions: one goroutine leases (Next) while
// another acks (Ack), each on its own turn of the group commit.
//
// Invariants:
//   - Every message a stream hands out is leased to its group under the
//     stream's Invisible lease, exactly as engine.Receive leases it: the
//     stream adds no delivery state of its own to the broker, and nothing
//     about it is durable. A stream that ends leaves its unacked messages
//     leased until their leases end, as a receive would.
//   - The window counts messages handed out by this stream whose receipts
//     were neither acked through it nor past their lease's end. A receipt
//     nacked or extended through another call keeps its room until the
//     lease it was handed out with would have ended.
//   - Next runs on one goroutine at a time; Ack may run beside it.
package stream

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
)

// MaxWindow is the largest window a stream may ask for.
const MaxWindow = 10_000

// DefaultWindow is the window of a stream that names none: one receive's
// worth (engine.MaxReceive) ahead of the acks, the order of the prefetch
// that consumers of other brokers get by default. Over HTTP every message
// stays in the window for a round trip, the consumer's work and an ack's
// commit-log fsync, some milliseconds under load on two cores: with a
// window of 256, BenchmarkReceiveAckStream8 (package server) ran at about
// 0.85 of its rate with 1,000. A consumer whose work per message is slow
// should ask for a smaller window, so that what it holds is not leased
// for longer than its lease.
const DefaultWindow = 1000

// Options configures a stream.
type Options struct {
	Topic, Group string
	// Max is the most messages a batch holds; 0 means
	// engine.DefaultReceive, at most engine.MaxReceive.
	Max int
	// Window is the most messages leased through the stream and not acked
	// through it; 0 means DefaultWindow (or Max, if larger), at most
	// MaxWindow. A batch is never larger than the room left in the window.
	Window int
	// Invisible is each message's lease; 0 means engine.DefaultInvisible.
	Invisible time.Duration
}

// Validate fills in the defaults and checks the options' ranges.
func (o *Options) Validate() error {
	if o.Max == 0 {
		o.Max = engine.DefaultReceive
	}
	if o.Invisible == 0 {
		o.Invisible = engine.DefaultInvisible
	}
	if o.Window == 0 {
		o.Window = max(DefaultWindow, o.Max)
	}
	switch {
	case o.Max < 1 || o.Max > engine.MaxReceive:
		return errs.New(errs.InvalidArgument, "max %d is not in [1, %d]", o.Max, engine.MaxReceive)
	case o.Window < 1 || o.Window > MaxWindow:
		return errs.New(errs.InvalidArgument, "window %d is not in [1, %d]", o.Window, MaxWindow)
	case o.Invisible < time.Millisecond || o.Invisible > engine.MaxInvisible:
		return errs.New(errs.InvalidArgument, "invisible %v is not in [1ms, %v]", o.Invisible, engine.MaxInvisible)
	}
	return nil
}

// Stream is one consumer's pipelined receive. Create it with Open.
type Stream struct {
	eng  *engine.Engine
	opts Options

	mu sync.Mutex
	// leased maps the receipts handed out and not yet acked through the
	// stream to the engine time (ms) their lease ends; its size is the
	// window's use.
	leased map[string]int64
	// order holds leased's receipts in the order they were leased, which
	// is the order their leases end (one lease length, a clock that does
	// not go back); acked ones leave it lazily, at its front or when it
	// is compacted.
	order []lease
	// room is signalled (without blocking: capacity 1) when an ack frees
	// room in the window.
	room chan struct{}
	// ahead holds messages leased and not yet returned by Next (Next's
	// goroutine only): a lease takes all the room the window has, in one
	// receive and one commit-log append, and Next hands it out Max at a
	// time.
	ahead []engine.Received
}

type lease struct {
	receipt string
	ends    int64
}

// Open checks opts and the group (creating it on first use, as a receive
// does) and returns a stream over it.
func Open(eng *engine.Engine, opts Options) (*Stream, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	err := eng.CreateGroup(opts.Topic, opts.Group, engine.GroupConfig{})
	if err != nil && errs.CodeOf(err) != errs.AlreadyExists {
		return nil, err
	}
	return &Stream{eng: eng, opts: opts, leased: make(map[string]int64), room: make(chan struct{}, 1)}, nil
}

// Options returns the stream's options, defaults filled in.
func (s *Stream) Options() Options { return s.opts }

// Next returns the next batch of at most Max leased messages. When none
// is left of the last lease, it waits until the window has room and a
// message is visible, then leases as many as the room allows (at most
// engine.MaxReceive) in one receive: the window is the stream's prefetch,
// and one lease (one commit-log append and fsync) serves as many batches
// as the consumer's acks have made room for meanwhile. It returns ctx's
// error once ctx has ended (a lease made as it ended is released, not
// returned: the stream is over), and the engine's error if a receive
// fails. What Next leased and has not returned is released by Close.
func (s *Stream) Next(ctx context.Context) ([]engine.Received, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(s.ahead) > 0 {
		n := min(len(s.ahead), s.opts.Max)
		out := s.ahead[:n:n]
		s.ahead = s.ahead[n:]
		return out, nil
	}
	for {
		room, wake := s.free()
		if room == 0 {
			if err := s.waitRoom(ctx, wake); err != nil {
				return nil, err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		got, err := s.eng.Receive(ctx, engine.ReceiveRequest{
			Topic: s.opts.Topic, Group: s.opts.Group, Max: min(engine.MaxReceive, room),
			Invisible: s.opts.Invisible, Wait: engine.MaxReceiveWait,
		})
		if err != nil {
			return nil, err
		}
		if len(got) == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		ends := s.eng.Now() + clock.CeilMillis(s.opts.Invisible) // as the engine counts the lease
		s.mu.Lock()
		for i := range got {
			s.leased[got[i].Receipt] = ends
			s.order = append(s.order, lease{got[i].Receipt, ends})
		}
		s.mu.Unlock()
		if err := ctx.Err(); err != nil {
			s.Release(got)
			return nil, err
		}
		s.ahead = got
		return s.Next(ctx)
	}
}

// Release gives back messages Next handed out that never reached the
// consumer (engine.Release: ready again at once, their attempt not
// counted) and frees their room in the window.
func (s *Stream) Release(got []engine.Received) {
	if len(got) == 0 {
		return
	}
	rs := make([]string, len(got))
	for i := range got {
		rs[i] = got[i].Receipt
	}
	s.eng.Release(s.opts.Topic, s.opts.Group, rs)
	s.forget(rs)
}

// Close releases what Next leased and has not returned; call it from
// Next's goroutine once the stream is over.
func (s *Stream) Close() {
	s.Release(s.ahead)
	s.ahead = nil
}

// forget frees the window's room of receipts and wakes a Next waiting
// for room.
func (s *Stream) forget(receipts []string) {
	s.mu.Lock()
	for _, r := range receipts {
		delete(s.leased, r)
	}
	s.mu.Unlock()
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// roomPoll is the longest waitRoom waits without looking at the window
// again: the leases' ends are in the engine's time, which a virtual clock
// (-clock virtual) moves in jumps that no real-time timer sees.
const roomPoll = time.Second

// waitRoom waits until an ack frees room, or until the first lease in the
// window ends (wake, in the engine's time; at most roomPoll), or for ctx.
func (s *Stream) waitRoom(ctx context.Context, wake time.Duration) error {
	t := time.NewTimer(min(max(wake, time.Millisecond), roomPoll))
	defer t.Stop()
	select {
	case <-s.room:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// free returns the room left in the window, after dropping receipts whose
// lease has ended; with no room, also how long until the first of them
// ends (0 if none is timed).
func (s *Stream) free() (room int, wake time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.eng.Now()
	for len(s.order) > 0 {
		l := s.order[0]
		if ends, ok := s.leased[l.receipt]; ok && ends == l.ends {
			if ends > now {
				break
			}
			delete(s.leased, l.receipt)
		}
		s.order = s.order[1:]
	}
	if len(s.order) > 2*len(s.leased)+1024 {
		// Mostly acked: keep the leased ones only, in order.
		kept := make([]lease, 0, len(s.leased))
		for _, l := range s.order {
			if ends, ok := s.leased[l.receipt]; ok && ends == l.ends {
				kept = append(kept, l)
			}
		}
		s.order = kept
	}
	if room = s.opts.Window - len(s.leased); room > 0 || len(s.order) == 0 {
		return max(room, 0), 0
	}
	return 0, time.Duration(s.order[0].ends-now) * time.Millisecond
}

// Ack acknowledges receipts of the stream's group (engine.Ack: all or
// nothing, at most engine.MaxReceive) and frees the window's room of
// those this stream handed out. It returns how many distinct receipts it
// acked.
func (s *Stream) Ack(ctx context.Context, receipts []string) (int, error) {
	if len(receipts) == 0 {
		return 0, errs.New(errs.InvalidArgument, "no receipts to ack")
	}
	if err := s.eng.Ack(ctx, s.opts.Topic, s.opts.Group, receipts...); err != nil {
		return 0, err
	}
	s.forget(receipts)
	return Distinct(receipts), nil
}

// Ahead returns how many messages Next has leased and not yet returned:
// the next call returns at once when it is not 0.
func (s *Stream) Ahead() int { return len(s.ahead) }

// Leased returns how many messages the window holds: handed out, not
// acked through the stream, and not known to be past their lease.
func (s *Stream) Leased() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.leased)
}

// AckLines acks the lines of receipts it reads from lines, in order, until
// lines is closed or ctx ends, and reports each line's outcome to done
// (acked: its distinct receipts) in the same order; it stops early when
// done returns false. The lines that queue up while an ack is being made
// are acked together in one engine.Ack (one commit-log append and fsync),
// up to engine.MaxReceive receipts: a consumer's acks are not limited to
// one line per fsync. A combined ack that fails is made again line by
// line, so that each line is all or nothing on its own and gets its own
// outcome. Once ctx has ended no further ack is made: a line read but not
// acked gets no outcome.
func (s *Stream) AckLines(ctx context.Context, lines <-chan []string, done func(acked int, err error) bool) {
	var batch [][]string
	var carry []string
	for {
		first := carry
		carry = nil
		if first == nil {
			var ok bool
			select {
			case first, ok = <-lines:
				if !ok {
					return
				}
			case <-ctx.Done():
				return
			}
		}
		batch = append(batch[:0], first)
		n, open := len(first), true
	more:
		for open && n < engine.MaxReceive {
			select {
			case l, ok := <-lines:
				switch {
				case !ok:
					open = false
				case n+len(l) > engine.MaxReceive:
					carry = l
					break more
				default:
					batch = append(batch, l)
					n += len(l)
				}
			default:
				break more
			}
		}
		// The stream may have ended while the lines queued: an ack made
		// now could not be answered.
		if ctx.Err() != nil || !s.ackBatch(ctx, batch, done) || !open {
			return
		}
	}
}

// ackBatch acks lines together, or, if that fails, one by one.
func (s *Stream) ackBatch(ctx context.Context, lines [][]string, done func(int, error) bool) bool {
	// Combined only when no receipt is in two lines: acked one by one, the
	// second line naming an acked receipt would fail, so acking them
	// together must not make it succeed.
	if len(lines) > 1 && disjoint(lines) {
		var all []string
		for _, l := range lines {
			all = append(all, l...)
		}
		if _, err := s.Ack(ctx, all); err == nil {
			for _, l := range lines {
				if !done(Distinct(l), nil) {
					return false
				}
			}
			return true
		}
	}
	for _, l := range lines {
		if ctx.Err() != nil || !done(s.Ack(ctx, l)) {
			return false
		}
	}
	return true
}

// disjoint reports whether no receipt is in two of the lines.
func disjoint(lines [][]string) bool {
	seen := make(map[string]int)
	for i, l := range lines {
		for _, r := range l {
			if j, ok := seen[r]; ok && j != i {
				return false
			}
			seen[r] = i
		}
	}
	return true
}

// Distinct counts the distinct receipts of an ack: the engine acks a
// receipt given twice once, and the API's counts say so.
func Distinct(rs []string) int {
	if len(rs) < 2 {
		return len(rs)
	}
	s := slices.Clone(rs)
	slices.Sort(s)
	return len(slices.Compact(s))
}
