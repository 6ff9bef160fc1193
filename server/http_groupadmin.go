package server

import (
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
)

// An operator's changes to a consumer group: its policy, pause and
// resume, and seek (engine.GroupAdmin). Each answers the group after it.

// setGroupPolicy is PATCH /v1/topics/{topic}/groups/{group}: the fields
// given change, the others stay; a body that gives none changes nothing
// and answers the group as it is.
func (h *Handler) setGroupPolicy(w http.ResponseWriter, r *http.Request) {
	var in api.GroupConfig
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	var p engine.PolicyChange
	if in.MaxAttempts != 0 {
		p.MaxAttempts = &in.MaxAttempts
	}
	for _, f := range []struct {
		name, value string
		dst         **time.Duration
	}{{"backoff_base", in.BackoffBase, &p.BackoffBase}, {"backoff_max", in.BackoffMax, &p.BackoffMax}} {
		if f.value == "" {
			continue
		}
		d, err := positiveDurationField(f.name, f.value)
		if err != nil {
			h.writeError(w, err)
			return
		}
		*f.dst = &d
	}
	g, err := h.eng.GroupAdmin().SetPolicy(pathTopic(r), r.PathValue("group"), p)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, groupOf(g))
}

func (h *Handler) pauseGroup(w http.ResponseWriter, r *http.Request)  { h.setPaused(w, r, true) }
func (h *Handler) resumeGroup(w http.ResponseWriter, r *http.Request) { h.setPaused(w, r, false) }

// setPaused pauses or resumes a group; a paused group's receives hand
// out nothing until it is resumed, across restarts.
func (h *Handler) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	g, err := h.eng.GroupAdmin().SetPaused(pathTopic(r), r.PathValue("group"), paused)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, groupOf(g))
}

// seekGroup is POST /v1/topics/{topic}/groups/{group}/seek.
func (h *Handler) seekGroup(w http.ResponseWriter, r *http.Request) {
	var in api.SeekRequest
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	if in.To == nil {
		h.writeError(w, errs.New(errs.InvalidArgument, "to is required: the Unix time in milliseconds to move the group to"))
		return
	}
	res, err := h.eng.GroupAdmin().Seek(r.Context(), pathTopic(r), r.PathValue("group"), int64(*in.To))
	if err != nil {
		h.writeError(w, err)
		return
	}
	out := api.SeekResult{Group: groupOf(res.Group), Queues: make([]api.SeekQueue, len(res.To))}
	for q := range res.To {
		out.Queues[q] = api.SeekQueue{Queue: q, From: res.From[q], To: res.To[q]}
	}
	writeJSON(w, http.StatusOK, out)
}
