package server

import (
	"github.com/hourglass-mq/hourglass/access"

	"net/http"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/schedule"
)

// pathSchedule returns the {schedule} path value, checked by the naming
// rules of a topic.
func pathSchedule(r *http.Request) (string, error) {
	id := r.PathValue("schedule")
	return id, message.ValidateName("schedule id", id)
}

// noSchedules refuses schedule requests on a handler given no runner
// (Options.Schedules; some tests build one).
func (h *Handler) noSchedules(w http.ResponseWriter) bool {
	if h.schedules != nil {
		return false
	}
	h.writeError(w, errs.New(errs.Unavailable, "this server does not run schedules"))
	return true
}

func scheduleOf(in schedule.Info, state string) api.Schedule {
	out := api.Schedule{ID: in.ID, Topic: in.Topic, Key: in.Key, Tag: in.Tag, Properties: in.Properties,
		BodyBytes: len(in.Body), Cron: in.Cron, TZ: in.TZ, CatchUp: string(in.CatchUp), State: state,
		Created: api.Millis(in.Created), LastFire: api.Millis(in.LastFire), LastMessageID: in.LastID,
		Next: []api.Millis{}, NextTimes: []string{}, LastError: in.LastError}
	if out.Key == "" {
		out.Key = in.ID
	}
	if state == "" {
		out.State = api.ScheduleActive
		if in.Paused {
			out.State = api.SchedulePaused
		}
	}
	for _, t := range in.Next {
		out.Next = append(out.Next, api.Millis(t))
		out.NextTimes = append(out.NextTimes, api.Millis(t).RFC3339())
	}
	return out
}

func (h *Handler) createSchedule(w http.ResponseWriter, r *http.Request) {
	if h.noSchedules(w) {
		return
	}
	id, err := pathSchedule(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	var in api.ScheduleConfig
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	// The body and headers are read as a send's are.
	req, err := sendRequest(&api.SendMessage{Key: in.Key, Tag: in.Tag, Properties: in.Properties, Body: in.Body, BodyBase64: in.BodyBase64}, in.Topic)
	if err != nil {
		h.writeError(w, err)
		return
	}
	if err := message.ValidateName("topic", in.Topic); err != nil {
		h.writeError(w, err)
		return
	}
	// A schedule sends its firings as its creator: admin on the schedule
	// does not give a way to send where the principal may not, and the
	// check comes before the topic is looked up.
	if p := principalOf(r); !p.Allowed(access.Send, in.Topic) {
		h.audit.Record(r.Context(), "http", p.Name, access.Send, in.Topic, access.ResultDenied, "schedule "+id)
		h.writeError(w, access.Denied(p, access.Send, in.Topic))
		return
	}
	if t, err := h.eng.DescribeTopic(in.Topic); err == nil && t.FIFO {
		h.writeError(w, errs.New(errs.InvalidArgument, "topic %q is a FIFO topic; schedules send to normal topics only", in.Topic))
		return
	} else if err != nil && !h.opts.AutoCreateTopics {
		h.writeError(w, errs.New(errs.NotFound, "topic %q does not exist and the broker does not create topics on first send", in.Topic))
		return
	}
	info, err := h.schedules.Create(schedule.Schedule{ID: id, Topic: in.Topic, Key: in.Key, Tag: in.Tag,
		Properties: req.Message.Properties, Body: req.Message.Body, Cron: in.Cron, TZ: in.TZ, CatchUp: schedule.CatchUp(in.CatchUp)})
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, scheduleOf(info, ""))
}

func (h *Handler) listSchedules(w http.ResponseWriter, r *http.Request) {
	if h.noSchedules(w) {
		return
	}
	out := api.ScheduleList{Schedules: []api.Schedule{}}
	p := principalOf(r)
	for _, s := range h.schedules.List() {
		if !p.Allowed(access.Admin, access.ScheduleResource(s.ID)) {
			continue
		}
		out.Schedules = append(out.Schedules, scheduleOf(s, ""))
	}
	writeJSON(w, http.StatusOK, out)
}

// scheduleOp serves the routes that name one schedule.
func (h *Handler) scheduleOp(w http.ResponseWriter, r *http.Request, op func(id string) (schedule.Info, error), state string) {
	if h.noSchedules(w) {
		return
	}
	id, err := pathSchedule(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	info, err := op(id)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, scheduleOf(info, state))
}

func (h *Handler) getSchedule(w http.ResponseWriter, r *http.Request) {
	h.scheduleOp(w, r, h.schedules.Get, "")
}

func (h *Handler) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	h.scheduleOp(w, r, h.schedules.Pause, "")
}

func (h *Handler) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	h.scheduleOp(w, r, h.schedules.Resume, "")
}

func (h *Handler) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	h.scheduleOp(w, r, h.schedules.Delete, api.ScheduleDeleted)
}
