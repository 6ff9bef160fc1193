package kafkahttp

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// cancel serves DELETE /v1/messages/{id}: a cancel record for the offset,
// in its partition.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) error {
	p, o, err := h.pathID(r)
	if err != nil {
		return err
	}
	id := FormatID(p, o)
	// Serialized with the partition's reschedules: a cancel that races a
	// reschedule of the same message would otherwise find the original
	// cancelled by the reschedule and answer "cancelled" while the copy
	// is delivered.
	defer h.lockPartition(p)()
	loc, err := h.loc.Locate(r.Context(), p, o, false)
	if err != nil {
		return err
	}
	if loc.Where != kafkamode.WherePending && loc.Where != kafkamode.WhereDue {
		return resolvedError(id, loc)
	}
	// A message copied forward is cancelled at its copy (loc.Offset).
	ctl, err := h.produce(r.Context(), &kgo.Record{Partition: p, Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderCancel, Value: []byte("offset:" + strconv.FormatInt(loc.Offset, 10))}}})
	if err != nil {
		return err
	}
	if !h.applied(r.Context(), ctl) {
		writeJSON(w, http.StatusAccepted, api.KafkaCancel{ID: id, Control: ctl, State: api.StateCancelRequested})
		return nil
	}
	// The cancel record is resolved, so the message is too: cancelled by
	// it, or forwarded before it.
	if loc, err = h.loc.Locate(r.Context(), p, o, true); err != nil {
		return err
	}
	switch loc.Where {
	case kafkamode.WhereCancelled:
		writeJSON(w, http.StatusOK, api.KafkaCancel{ID: id, Control: ctl, State: api.StateCancelled})
		return nil
	case kafkamode.WhereForwarded:
		return errs.New(errs.FailedPrecondition, "message %s was forwarded at %s, before the cancel %s took effect", id,
			api.Millis(loc.Forwarded).RFC3339(), ctl)
	}
	writeJSON(w, http.StatusAccepted, api.KafkaCancel{ID: id, Control: ctl, State: api.StateCancelRequested})
	return nil
}

// applyWait bounds how long a cancel waits for the worker to apply it.
const applyWait = 5 * time.Second

// applied waits until the cancel record ctl is resolved in the committed
// progress, that is, applied by the worker that owns its partition, or
// applyWait passed (the worker is down or far behind): then false.
func (h *Handler) applied(ctx context.Context, ctl string) bool {
	p, o, err := ParseID(ctl)
	if err != nil {
		return false
	}
	return h.resolvedWithin(ctx, p, o)
}

// resolvedWithin waits until the delay record at (p, o) is resolved in the
// committed progress, at most applyWait; it reports whether it is.
func (h *Handler) resolvedWithin(ctx context.Context, p int32, o int64) bool {
	ctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	for {
		if ok, err := h.loc.Resolved(ctx, p, o); ok && err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cancelKey serves DELETE /v1/keys/{key}: a cancel record with the key,
// in the key's partition, which cancels every message with the key
// produced before it and still pending.
func (h *Handler) cancelKey(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	if r.URL.RawQuery != "" {
		return errorf("query %q is not accepted: DELETE /v1/keys/{key} takes no query parameters", r.URL.RawQuery)
	}
	n, err := h.partitions(r.Context())
	if err != nil {
		return err
	}
	p := kafkamode.KeyPartition(key, n)
	pending, err := h.loc.PendingWithKey(r.Context(), p, key)
	if err != nil {
		return err
	}
	if len(pending) == 0 {
		return errs.New(errs.NotFound, "no pending message with key %q in delay partition %d: nothing to cancel, and no cancel record was written", key, p)
	}
	ctl, err := h.produce(r.Context(), &kgo.Record{Key: key, Partition: p,
		Headers: []kgo.RecordHeader{{Key: kafkamode.HeaderCancel, Value: []byte("key")}}})
	if err != nil {
		return err
	}
	answer := api.KafkaCancel{Key: string(key), Control: ctl, State: api.StateCancelRequested, Matched: len(pending)}
	if !h.applied(r.Context(), ctl) {
		writeJSON(w, http.StatusAccepted, answer)
		return nil
	}
	if at, all := h.allForwarded(r.Context(), p, pending); all {
		return errs.New(errs.FailedPrecondition, "every message with key %q (%d) was forwarded before the cancel %s took effect (the last at %s)",
			key, len(pending), ctl, api.Millis(at).RFC3339())
	}
	answer.State = api.StateCancelled
	writeJSON(w, http.StatusOK, answer)
	return nil
}

// allForwarded reports whether every message of partition p at offsets
// was forwarded (each resolved already), and when the last one found was.
// It stops at the first that was not: one is enough for the cancel to
// have cancelled something. A message whose fate the search cannot tell
// counts as not forwarded.
func (h *Handler) allForwarded(ctx context.Context, p int32, offsets []int64) (last int64, all bool) {
	for _, o := range offsets {
		loc, err := h.loc.Locate(ctx, p, o, true)
		if err != nil || loc.Where != kafkamode.WhereForwarded {
			return 0, false
		}
		last = max(last, loc.Forwarded)
	}
	return last, true
}

// reschedule serves POST /v1/messages/{id}/reschedule: a copy of the
// message due at the new time that cancels the original (by offset), in
// its partition. The answer carries the copy's ID.
func (h *Handler) reschedule(w http.ResponseWriter, r *http.Request) error {
	p, o, err := h.pathID(r)
	if err != nil {
		return err
	}
	var req api.RescheduleRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	now := h.opts.Now().UnixMilli()
	due, err := dueOf(req.Delivery, now)
	if err != nil {
		return err
	}
	if req.Delay == "" && req.At == 0 {
		return errorf("give the new time: delay or at")
	}
	id := FormatID(p, o)
	// One reschedule of a partition at a time, each until the worker
	// applied it: a second reschedule of the same ID then finds it
	// resolved (409) instead of scheduling a second copy.
	defer h.lockPartition(p)()
	loc, err := h.loc.Locate(r.Context(), p, o, false)
	if err != nil {
		return err
	}
	switch {
	case loc.Problem != "":
		return errs.New(errs.FailedPrecondition, "message %s has bad control headers (%s): it is dead-lettered, not scheduled", id, loc.Problem)
	case loc.Where != kafkamode.WherePending:
		return resolvedError(id, loc)
	case req.IfDue != 0 && int64(req.IfDue) != loc.Due:
		return errs.New(errs.FailedPrecondition, "message %s is due at %d, not at if_due %d", id, loc.Due, req.IfDue)
	case loc.Due-now < rescheduleMargin.Milliseconds():
		return errs.New(errs.FailedPrecondition, "message %s is due in %d ms: too close to its due time to move (the worker may be forwarding it)", id, loc.Due-now)
	}
	rec := &kgo.Record{Partition: p, Key: loc.Record.Key, Value: loc.Record.Value, Timestamp: time.UnixMilli(now)}
	for _, hd := range loc.Record.Headers {
		if !isControl(hd.Key) {
			rec.Headers = append(rec.Headers, hd)
		}
	}
	// A message copied forward is rescheduled from its copy (loc.Offset).
	at := loc.Offset
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: kafkamode.HeaderCancel, Value: []byte("offset:" + strconv.FormatInt(at, 10))})
	rec.Headers = append(rec.Headers, schedule(due, loc.BizTopic)...)
	nid, err := h.produce(r.Context(), rec)
	if err != nil {
		return err
	}
	// The copy is durable. The worker forwards it only if its cancel half
	// replaced the message (loop.go, settleReschedule); if the message
	// was forwarded first, the copy is dead-lettered. Wait for the
	// original to be resolved, then say which.
	answer := api.Rescheduled{ID: nid, Due: api.Millis(due), DueTime: api.Millis(due).RFC3339()}
	if !h.resolvedWithin(r.Context(), p, at) {
		writeJSON(w, http.StatusAccepted, answer)
		return nil
	}
	if loc, err := h.loc.Locate(r.Context(), p, at, true); err == nil && loc.Where == kafkamode.WhereForwarded {
		return errs.New(errs.FailedPrecondition, "message %s was forwarded at %s, before the reschedule took effect: its copy %s went to the dead-letter topic",
			id, api.Millis(loc.Forwarded).RFC3339(), nid)
	}
	writeJSON(w, http.StatusOK, answer)
	return nil
}

// lockPartition takes the lock that serializes the changes (reschedules and
// cancels by ID) of partition p through this API, and returns its unlock.
func (h *Handler) lockPartition(p int32) func() {
	mu, _ := h.reschedMu.LoadOrStore(p, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}
