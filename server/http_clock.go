package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
)

// maxAdvance bounds one advance of the virtual clock: far more than a test
// needs, and far from overflowing Unix milliseconds.
const maxAdvance = 100 * 365 * 24 * time.Hour

// settleTimeout bounds how long an advance waits for what fell due to
// become visible before it answers with settled false.
const settleTimeout = 10 * time.Second

// clockMode names the broker's clock mode.
func (h *Handler) clockMode() string {
	if h.virtual != nil {
		return api.ClockVirtual
	}
	return api.ClockSystem
}

func (h *Handler) clockTime(now int64, settled bool) api.ClockTime {
	m := api.Millis(now)
	return api.ClockTime{Mode: h.clockMode(), Now: m, NowTime: m.RFC3339(), Settled: settled}
}

// clockNow answers GET /v1/clock on either clock: reading the time is
// harmless.
func (h *Handler) clockNow(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.clockTime(h.eng.Now(), true))
}

// clockAdvance moves the virtual clock forward and answers once what fell
// due by the new time is visible (or settleTimeout passed).
func (h *Handler) clockAdvance(w http.ResponseWriter, r *http.Request) {
	if h.virtual == nil {
		h.writeError(w, errs.New(errs.FailedPrecondition,
			"the broker runs on the system clock; moving time needs a broker started with -clock virtual (for tests only)"))
		return
	}
	var req api.ClockAdvance
	body, err := h.readBody(w, r)
	if err == nil {
		err = decodeBody(body, &req, false)
	}
	if err == nil {
		// Exactly one field, a zero one too: {"by":"1s","by_ms":0} is
		// refused, not read as a 1 s advance.
		var fields map[string]json.RawMessage
		if json.Unmarshal(body, &fields) == nil && len(fields) != 1 {
			err = errs.New(errs.InvalidArgument, "give exactly one of by (a duration such as 30m), by_ms or to (Unix ms); the body has %d fields", len(fields))
		}
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	now := h.eng.Now()
	target, err := advanceTarget(req, now)
	if err != nil {
		h.writeError(w, err)
		return
	}
	h.virtual.AdvanceTo(time.UnixMilli(target))
	settled := h.settle(r, target)
	writeJSON(w, http.StatusOK, h.clockTime(h.eng.Now(), settled))
}

// advanceTarget validates an advance request against the broker time now
// and returns the new time.
func advanceTarget(req api.ClockAdvance, now int64) (int64, error) {
	n := 0
	for _, set := range []bool{req.By != "", req.ByMs != 0, req.To != 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		return 0, errs.New(errs.InvalidArgument, "give exactly one of by (a duration such as 30m), by_ms or to (Unix ms)")
	}
	var by time.Duration
	switch {
	case req.By != "":
		d, err := durationField("by", req.By)
		if err != nil {
			return 0, err
		}
		by = d
	case req.ByMs != 0:
		if req.ByMs < 0 || req.ByMs > maxAdvance.Milliseconds() {
			return 0, errs.New(errs.InvalidArgument, "by_ms %d is not in [0, %d]: the clock never runs backwards", req.ByMs, maxAdvance.Milliseconds())
		}
		by = time.Duration(req.ByMs) * time.Millisecond
	default:
		if int64(req.To) < now {
			return 0, errs.New(errs.InvalidArgument, "to %d (%s) is before the broker's time %d (%s): the clock never runs backwards",
				req.To, req.To.RFC3339(), now, api.Millis(now).RFC3339())
		}
		// Compared in milliseconds first: a far "to" would overflow the
		// Duration and pass the bound below as a small advance.
		if ms := int64(req.To) - now; ms > maxAdvance.Milliseconds() {
			return 0, errs.New(errs.InvalidArgument, "to %d is %d ms after the broker's time; an advance is at most %v", req.To, ms, maxAdvance)
		}
		by = time.Duration(int64(req.To)-now) * time.Millisecond
	}
	if by < 0 || by > maxAdvance {
		return 0, errs.New(errs.InvalidArgument, "an advance of %v is not in [0, %v]: the clock never runs backwards", by, maxAdvance)
	}
	return now + by.Milliseconds(), nil
}

// settle waits until every message due at or before target is visible.
// It polls: the fire frontier moves without a visibility when nothing is
// due, so there is no event to wait on for that case.
func (h *Handler) settle(r *http.Request, target int64) bool {
	deadline := time.Now().Add(settleTimeout)
	for {
		// Schedules first: a firing they send is then covered by the
		// frontier read after it.
		if (h.schedules == nil || h.schedules.Settled(target)) && h.eng.Frontier() >= target {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-r.Context().Done():
			return false
		case <-h.draining.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
}
