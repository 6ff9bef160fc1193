package kafkamode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fencePrevious initializes a producer ID for this worker's transactional
// ID before the worker joins the group. That bumps the ID's epoch, which
// makes the transaction coordinator abort a transaction a previous
// incarnation (the same WorkerID, crashed) left open, at once rather than
// after its transaction timeout; and it fences that incarnation if it is
// in fact still alive. The coordinator answers CONCURRENT_TRANSACTIONS
// while it completes the abort, so this retries, for up to a minute.
func (w *Worker) fencePrevious(ctx context.Context) error {
	id := w.txnID()
	if err := w.initProducerID(ctx, id, time.Now().Add(time.Minute), 100*time.Millisecond); err != nil {
		return fmt.Errorf("fence the previous incarnation of transactional ID %s: %w", id, err)
	}
	return nil
}

// initProducerID sends InitProducerID for transactional ID id until the
// coordinator grants it (or until, or ctx is done), pausing between
// tries. A grant means any transaction the ID had open is aborted and its
// markers written: read_committed consumers have moved past it, and a
// producer still holding the old epoch is fenced.
func (w *Worker) initProducerID(ctx context.Context, id string, until time.Time, pause time.Duration) error {
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(w.cfg.TxnTimeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, w.ses.aux)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			return nil
		}
		// CONCURRENT_TRANSACTIONS is not marked retriable, but here it
		// only means the coordinator is still aborting.
		retry := kerr.IsRetriable(err) || errors.Is(err, kerr.ConcurrentTransactions)
		if !retry || time.Now().After(until) {
			return err
		}
		if !sleepUntil(ctx, time.Now().Add(pause)) {
			return ctx.Err()
		}
	}
}

// A worker's client ID in the group (the session client's, which the group
// coordinator lists with each member) is its transactional ID, a '~' and
// a nonce of nonceLen hex digits drawn when the worker is created. Other
// workers learn from it which transactional IDs belong to live members
// (fenceDeparted); the nonce tells this process's own memberships from
// another process's with the same WorkerID (liveTwin).
const nonceLen = 16

// newNonce draws a worker's nonce.
func newNonce() string {
	var b [nonceLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// memberClientID is the client ID of the worker with transactional ID
// txnID and nonce nonce.
func memberClientID(txnID, nonce string) string { return txnID + "~" + nonce }

// parseMemberClientID splits a member's client ID into transactional ID
// and nonce; ok is false for a client ID a worker did not make (another
// program in the group, or a worker of a version before fenceDeparted).
func parseMemberClientID(cid string) (txnID, nonce string, ok bool) {
	i := strings.LastIndexByte(cid, '~')
	if i <= 0 || len(cid)-i-1 != nonceLen {
		return "", "", false
	}
	nonce = cid[i+1:]
	if _, err := hex.DecodeString(nonce); err != nil || strings.ToLower(nonce) != nonce {
		return "", "", false
	}
	return cid[:i], nonce, true
}

// clientID is this worker's client ID in the group.
func (w *Worker) clientID() string { return memberClientID(w.txnID(), w.ses.nonce) }

// describeMembers returns the group's members as its coordinator lists
// them.
func (w *Worker) describeMembers(ctx context.Context) ([]kadm.DescribedGroupMember, error) {
	gs, err := w.ses.admin().DescribeGroups(ctx, w.cfg.Group)
	if err == nil {
		err = gs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", w.cfg.Group, err)
	}
	return gs[w.cfg.Group].Members, nil
}

// groupMembers returns, for each transactional ID among the group's
// members' client IDs, the nonces it is listed with.
func (w *Worker) groupMembers(ctx context.Context) (map[string][]string, error) {
	ms, err := w.describeMembers(ctx)
	if err != nil {
		return nil, err
	}
	return workerMembers(w.cfg.Group, clientIDs(ms)), nil
}

// clientIDs returns the client IDs of ms.
func clientIDs(ms []kadm.DescribedGroupMember) []string {
	cids := make([]string, len(ms))
	for i, m := range ms {
		cids[i] = m.ClientID
	}
	return cids
}

// workerMembers returns, for each transactional ID among client IDs cids
// of group's members, the nonces it is listed with. Only the IDs of this
// group's workers (txnID: group, '-', worker ID) count: any client that
// may join the group chooses its own client ID, and one that named
// another program's transactional ID and left would otherwise have the
// workers fence it and abort that program's open transaction.
func workerMembers(group string, cids []string) map[string][]string {
	live := map[string][]string{}
	prefix := group + "-"
	for _, cid := range cids {
		if id, nonce, ok := parseMemberClientID(cid); ok && len(id) > len(prefix) && strings.HasPrefix(id, prefix) {
			live[id] = append(live[id], nonce)
		}
	}
	return live
}

// fenceWait bounds how long a take-over waits for the coordinator to
// abort a departed worker's transaction; past it the take-over goes on and
// the transaction ends at its timeout, as it would unfenced.
const fenceWait = 5 * time.Second

// fenceDeparted aborts the open transaction of every worker that has left
// the group since the last rebalance, before this worker loads the state
// of the partitions it takes over. A worker killed inside a transaction
// leaves it open: read_committed consumers of every partition it wrote to
// (the business partitions of its forwards, its state partitions) and the
// group's offset fetch wait until the coordinator aborts it, at the
// transaction timeout plus up to the coordinator's abort sweep interval,
// whatever the session timeout. InitProducerID with its transactional ID
// aborts it at once.
//
// Which IDs: those this worker saw among the members' client IDs at the
// last rebalance and does not see now. A transactional ID is fenced only
// when no member of the group carries it, so no live worker is fenced: a
// worker that was only slow and was removed from the group (a pause past
// the session timeout) is a zombie by then, whose offset commit the group
// coordinator refuses anyway; fenced, its transaction ends aborted, and
// the worker joins again (Run). Only an open (Ongoing) transaction is
// fenced: one the worker ended before it died completes by itself.
// Failures are logged and cost only the wait this would have saved.
func (w *Worker) fenceDeparted(ctx context.Context) {
	log := w.cfg.Logger
	live, err := w.groupMembers(ctx)
	if err != nil {
		log.Warn("cannot list the group's members; a departed worker's open transaction is not fenced", "err", err)
		return
	}
	gone := w.ses.rosterSwap(live, w.txnID())
	if len(gone) == 0 {
		return
	}
	txns, err := w.ses.admin().DescribeTransactions(ctx, gone...)
	if err != nil && len(txns) == 0 {
		log.Warn("cannot describe the departed workers' transactions; not fenced", "ids", gone, "err", err)
		return
	}
	for _, id := range gone {
		t, ok := txns[id]
		if ok && t.Err != nil {
			// TRANSACTIONAL_ID_AUTHORIZATION_FAILED without Describe on
			// the other workers' transactional IDs, for one.
			log.Warn("cannot describe a departed worker's transaction; not fenced", "transactional_id", id, "err", t.Err)
			continue
		}
		if !ok || t.State != "Ongoing" {
			continue
		}
		began := time.Now()
		if err := w.initProducerID(ctx, id, began.Add(fenceWait), 5*time.Millisecond); err != nil {
			log.Warn("fencing a departed worker's open transaction failed; it ends at its timeout", "transactional_id", id, "err", err)
			continue
		}
		w.stats.FencedDeparted.Add(1)
		log.Info("fenced a departed worker's open transaction", "transactional_id", id,
			"open_for", time.Duration(began.UnixMilli()-t.StartTimestamp)*time.Millisecond, "took", time.Since(began))
	}
}

// rosterSwap records live as the group's members and returns the
// transactional IDs of the members recorded before that are not in live
// (never own, this worker's).
func (s *session) rosterSwap(live map[string][]string, own string) []string {
	s.rosterMu.Lock()
	defer s.rosterMu.Unlock()
	var gone []string
	for id := range s.roster {
		if _, ok := live[id]; !ok && id != own {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	s.roster = make(map[string]bool, len(live))
	for id := range live {
		s.roster[id] = true
	}
	return gone
}

// liveTwin describes a group member that has this worker's
// transactional ID but is another process: a second live worker with this
// WorkerID, which fenced this one. "" when there is none (this worker was
// fenced as a departed one: it joins again). A dynamic member is told by
// the nonce in its client ID; a static one by its member ID (staticTwin).
func (w *Worker) liveTwin(ctx context.Context) (string, error) {
	ms, err := w.describeMembers(ctx)
	if err != nil {
		return "", err
	}
	if w.cfg.StaticMember {
		if m := staticTwin(ms, w.cfg.WorkerID, w.ses.lastMemberID()); m != "" {
			return "with member ID " + m, nil
		}
		return "", nil
	}
	for _, nonce := range workerMembers(w.cfg.Group, clientIDs(ms))[w.txnID()] {
		if nonce != w.ses.nonce {
			return memberClientID(w.txnID(), nonce), nil
		}
	}
	return "", nil
}

// staticTwin returns the member ID of the member of ms with group
// instance ID instance (this worker's WorkerID) when it is not own, the
// member ID this worker last had (a static member that stops does not
// leave: its membership stays listed until its session times out); ""
// when there is none. The nonce cannot tell a static twin: a static member
// that replaces another keeps the client ID of the member it replaced, so
// the group lists the replaced process's nonce under the twin's
// membership. A worker that never had a membership (own "") counts any
// member with its instance ID: it was fenced before its first
// assignment, which only a twin does.
func staticTwin(ms []kadm.DescribedGroupMember, instance, own string) string {
	for _, m := range ms {
		if m.InstanceID != nil && *m.InstanceID == instance && m.MemberID != own {
			return m.MemberID
		}
	}
	return ""
}

// fencedErr reports whether err is how a fence of this worker's
// transactional ID may reach it: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH
// or INVALID_TXN_STATE, depending on which request meets the new epoch
// first and in which state (on Kafka 4.1 a twin's fence ended a session
// with each). All are decided by checkFenced: a twin that took one for an
// ordinary failure joined again, fenced the other in turn, and left which
// of the two ends to chance. The last two also end a transaction the
// coordinator aborted at its timeout; with no twin in the group the
// worker joins again then, as before.
func fencedErr(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidTxnState)
}

// checkFenced decides, a second after a session ended with err, whether a
// fenced transactional ID ends the worker. It does when another process
// with this WorkerID is a member of the group by then: two live workers
// with one ID would fence each other for ever. Otherwise this worker was
// fenced as a departed one (fenceDeparted: it had been removed from the
// group, a pause past the session timeout) and joins again; its aborted
// transaction forwarded nothing, and the new owner forwards what it held.
// A group that cannot be described is taken as no twin: the next fence,
// if any, is decided again.
func (w *Worker) checkFenced(ctx context.Context, err error) error {
	if !fencedErr(err) || ctx.Err() != nil {
		return nil
	}
	twin, derr := w.liveTwin(ctx)
	if derr != nil {
		w.cfg.Logger.Warn("fenced, and cannot look for another worker with this worker ID; joining again", "err", derr)
		return nil
	}
	if twin != "" {
		return fmt.Errorf("%w: another live worker uses worker ID %q (group member %s)", err, w.cfg.WorkerID, twin)
	}
	w.cfg.Logger.Warn("fenced while out of the group (a pause past the session timeout?) or past the transaction timeout; joining again", "err", err)
	return nil
}
