package server

import (
	"net/http"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
)

// trail answers GET /v1/messages/{id}/trail: the message's history from
// the commit log. A made-up or forged ID answers 404, as inspect does.
func (h *Handler) trail(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	tr, err := h.eng.Trace(r.Context(), id)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, trailOf(tr))
}

func trailOf(tr engine.Trail) api.Trail {
	out := api.Trail{ID: tr.ID.String(), Topic: tr.Topic, Partial: tr.Partial, ScannedBytes: tr.Scanned,
		Events: make([]api.TrailEvent, len(tr.Events))}
	for i, ev := range tr.Events {
		e := api.TrailEvent{At: api.Millis(ev.At), AtTime: api.Millis(ev.At).RFC3339(), Kind: ev.Kind, Message: ev.Message.String(),
			Group: ev.Group, Attempt: ev.Attempt, Due: api.Millis(ev.Due), Until: api.Millis(ev.Until), Reason: ev.Reason}
		if ev.DeadLetter != nil {
			e.DeadLetter = ev.DeadLetter.String()
		}
		out.Events[i] = e
	}
	return out
}
