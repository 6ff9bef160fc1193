package kafkamode

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// session is the worker's membership of the group and its transactional
// producer: the group transact session of the current membership, the
// seed client for admin requests, the watch of the last transaction's
// completion (settle.go) and the request timings. Only this file,
// settle.go and fence.go touch its fields; the rest of the worker uses
// its methods.
type session struct {
	aux  *kgo.Client // admin, fencing, settle and state-loading requests
	gts  *kgo.GroupTransactSession
	fwd  *kgo.Client // at-least-once: the idempotent producer of forwards
	rtts *rttHook    // times the session client's requests
	// settling is done once the last transaction's end has completed
	// at the coordinator (settle.go); the next one waits for it.
	settling context.Context
	// endedAt is when the last transaction ended (watchSettle).
	endedAt time.Time
	// lastSettle is how long the last completed settle wait took (ns),
	// for the per-transaction debug line; written by the settle watch.
	lastSettle atomic.Int64
	// nonce tells this process's group memberships from another's with
	// the same transactional ID (fence.go, memberClientID).
	nonce string
	// roster is the transactional IDs of the group's members at the last
	// rebalance (fenceDeparted), under rosterMu: the group callbacks of
	// one session and the next may overlap.
	rosterMu sync.Mutex
	roster   map[string]bool
	// memberID is the group member ID of this worker's last assignment,
	// under rosterMu (staticTwin).
	memberID string
}

// setMemberID records the member ID cl has in the group now.
func (s *session) setMemberID(cl *kgo.Client) {
	id, _ := cl.GroupMetadata()
	s.rosterMu.Lock()
	s.memberID = id
	s.rosterMu.Unlock()
}

// lastMemberID returns the member ID setMemberID recorded last.
func (s *session) lastMemberID() string {
	s.rosterMu.Lock()
	defer s.rosterMu.Unlock()
	return s.memberID
}

// init readies the session; its request timings go to st.
func (s *session) init(st *Stages) {
	s.rtts = &rttHook{s: st}
	s.settling = settledCtx()
	s.nonce = newNonce()
}

// dial opens the admin client; closeAdmin closes it.
func (s *session) dial(brokers []string) error {
	var err error
	s.aux, err = kgo.NewClient(kgo.SeedBrokers(brokers...))
	return err
}

func (s *session) closeAdmin() { s.aux.Close() }

// admin is an admin client over the seed client.
func (s *session) admin() *kadm.Client { return kadm.NewClient(s.aux) }

// request sends a raw request on the seed client.
func (s *session) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return s.aux.Request(ctx, req)
}

// hooks is the option that times the session client's requests.
func (s *session) hooks() kgo.Opt { return kgo.WithHooks(s.rtts) }

// join starts a membership with opts; leave ends it (aborting a
// transaction in progress).
func (s *session) join(opts []kgo.Opt) error {
	var err error
	s.gts, err = kgo.NewGroupTransactSession(opts...)
	return err
}

func (s *session) leave() { s.gts.Close() }

// poll returns the records fetched (nil ctx: only what is buffered).
func (s *session) poll(ctx context.Context, n int) kgo.Fetches {
	return s.gts.PollRecords(ctx, n) //nolint:staticcheck // a nil context means "do not block"
}

func (s *session) begin() error { return s.gts.Begin() }

func (s *session) produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	s.gts.Produce(ctx, r, promise)
}

func (s *session) flush(ctx context.Context) error { return s.gts.Client().Flush(ctx) }

// end ends the transaction: commit (with commitFn rewriting its offset
// commit) or abort, as try says and the session allows.
func (s *session) end(ctx context.Context, commitFn func(*kmsg.TxnOffsetCommitRequest) error, try kgo.TransactionEndTry) (bool, error) {
	return s.gts.End(kgo.PreTxnCommitFnContext(ctx, commitFn), try)
}

// abortOpen aborts the transaction a failed end left open (an end whose
// context was cancelled returns before its EndTxn); without one it does
// nothing.
func (s *session) abortOpen(ctx context.Context) error {
	_, err := s.gts.End(ctx, kgo.TryAbort)
	return err
}

// setOffsets sets where the consumer of each partition resumes.
func (s *session) setOffsets(topic string, at map[int32]kgo.EpochOffset) {
	s.gts.Client().SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: at})
}

// settled reports whether the last transaction's end has completed (or
// the wait for it is over): the next transaction may start.
func (s *session) settled() bool { return s.settling.Err() != nil }

// ended is when the last transaction ended (zero: none yet this session).
func (s *session) ended() time.Time { return s.endedAt }

// settleDone is the context done once the last transaction settled.
func (s *session) settleDone() context.Context { return s.settling }

// waitSettled waits until the settle watch has ended, and forgets it.
func (s *session) waitSettled() {
	<-s.settling.Done()
	s.settling = settledCtx()
}

// debugTimes is the per-transaction debug line's request timings.
func (s *session) debugTimes() []any {
	return append([]any{"settle_before", time.Duration(s.lastSettle.Load())}, s.rtts.lastRTTs()...)
}

// dialForwarder opens the idempotent producer of at-least-once forwards,
// with opts; closeForwarder closes it (if open).
func (s *session) dialForwarder(opts []kgo.Opt) error {
	var err error
	s.fwd, err = kgo.NewClient(opts...)
	return err
}

func (s *session) closeForwarder() {
	if s.fwd != nil {
		s.fwd.Close()
	}
}

// forward produces recs with the idempotent producer and waits for every
// acknowledgement.
func (s *session) forward(ctx context.Context, recs ...*kgo.Record) kgo.ProduceResults {
	return s.fwd.ProduceSync(ctx, recs...)
}
