package server

import (
	"github.com/hourglass-mq/hourglass/access"

	"net/http"
	"strconv"
	"time"

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
	loc := scheduleZone(in.TZ)
	out.NextLocal = []string{}
	for _, t := range in.Next {
		out.Next = append(out.Next, api.Millis(t))
		out.NextTimes = append(out.NextTimes, api.Millis(t).RFC3339())
		out.NextLocal = append(out.NextLocal, localTime(t, loc))
	}
	return out
}

// scheduleZone is a schedule's time zone, checked when it was created;
// UTC if it is gone from this machine's zone database since.
func scheduleZone(tz string) *time.Location {
	if loc, err := time.LoadLocation(tz); err == nil {
		return loc
	}
	return time.UTC
}

// localTime renders ms in loc, RFC 3339 with milliseconds and the offset.
func localTime(ms int64, loc *time.Location) string {
	return time.UnixMilli(ms).In(loc).Format("2006-01-02T15:04:05.000Z07:00")
}

// scheduleFirings answers GET /v1/schedules/{schedule}/firings?n=N (1 to
// 50, default 10): what became of the latest fire times.
func (h *Handler) scheduleFirings(w http.ResponseWriter, r *http.Request) {
	if h.noSchedules(w) {
		return
	}
	id, err := pathSchedule(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	for k := range r.URL.Query() {
		if k != "n" {
			h.writeError(w, errs.New(errs.InvalidArgument, "query parameter %q is not accepted; this endpoint takes only n", k))
			return
		}
	}
	n := 10
	if q := r.URL.Query().Get("n"); q != "" {
		if n, err = strconv.Atoi(q); err != nil {
			h.writeError(w, errs.New(errs.InvalidArgument, "n %q is not a whole number", q))
			return
		}
	}
	fs, err := h.schedules.Firings(id, n)
	if err != nil {
		h.writeError(w, err)
		return
	}
	info, err := h.schedules.Get(id)
	if err != nil {
		h.writeError(w, err)
		return
	}
	loc := scheduleZone(info.TZ)
	out := api.ScheduleFirings{ID: id, TZ: info.TZ, Firings: make([]api.ScheduleFiring, len(fs))}
	for i, f := range fs {
		sf := api.ScheduleFiring{Fire: api.Millis(f.Fire), FireTime: api.Millis(f.Fire).RFC3339(), FireLocal: localTime(f.Fire, loc),
			Key: f.Key, Sent: f.Sent, Ahead: f.Ahead}
		if f.Sent {
			sf.MessageID, sf.State = f.ID.String(), api.State(f.State)
		}
		out.Firings[i] = sf
	}
	writeJSON(w, http.StatusOK, out)
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
