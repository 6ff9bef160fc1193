package server

import (
	"net/http"
	"path"
	"time"

	"github.com/hourglass-mq/hourglass/api"
)

// damage answers GET /v1/admin/damage: the damaged ranges the scrub found,
// the messages groups set aside, and the scrub's state (engine.Damage,
// engine.Scrub).
func (h *Handler) damage(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.damageReport())
}

func (h *Handler) damageReport() api.Damage {
	d := h.eng.Damage()
	out := api.Damage{Ranges: make([]api.DamagedRange, 0, len(d.Ranges)), SetAside: make([]api.SetAside, 0, len(d.SetAside)), SetAsideTotal: d.SetAsideTotal}
	for _, x := range d.Ranges {
		out.Ranges = append(out.Ranges, api.DamagedRange{Segment: path.Join("log", x.Segment), Pos: uint64(x.Pos), Offset: x.Offset,
			Length: x.Length, Reason: x.Reason, RecordsAfter: x.RecordsAfter})
	}
	for _, s := range d.SetAside {
		out.SetAside = append(out.SetAside, api.SetAside{Pos: s.Pos, Segment: s.Segment, Topic: s.Topic, Group: s.Group,
			Queue: s.Queue, Offset: s.Offset, Reason: s.Reason})
	}
	s := h.eng.Scrub()
	out.Scrub = api.Scrub{Enabled: s.Enabled, RateBytes: s.Rate, Passes: s.Passes, Bytes: s.Bytes, LastError: s.LastError}
	if s.LastPass != 0 {
		out.Scrub.LastPassTime = time.UnixMilli(s.LastPass).UTC().Format(time.RFC3339Nano)
	}
	return out
}
