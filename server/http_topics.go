package server

import (
	"math"
	"net/http"
	"sort"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

func (h *Handler) createTopic(w http.ResponseWriter, r *http.Request) {
	var in api.TopicConfig
	if err := h.decode(w, r, &in, true); err != nil {
		h.writeError(w, err)
		return
	}
	name := pathTopic(r)
	if err := h.eng.CreateTopic(name, engine.TopicConfig{Queues: in.Queues, FIFO: in.FIFO}); err != nil {
		h.writeError(w, err)
		return
	}
	ts, err := h.eng.DescribeTopic(name)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, topicOf(ts))
}

func (h *Handler) listTopics(w http.ResponseWriter, r *http.Request) {
	out := api.TopicList{Topics: []api.Topic{}}
	p := principalOf(r)
	for _, t := range h.eng.Topics() {
		if !p.SeesTopic(t.Name) {
			continue
		}
		ts, err := h.eng.DescribeTopic(t.Name)
		if errs.CodeOf(err) == errs.NotFound {
			continue
		}
		if err != nil {
			h.writeError(w, err)
			return
		}
		out.Topics = append(out.Topics, visibleGroups(topicOf(ts), p))
	}
	sort.Slice(out.Topics, func(i, j int) bool { return out.Topics[i].Name < out.Topics[j].Name })
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) describeTopic(w http.ResponseWriter, r *http.Request) {
	name := pathTopic(r)
	if err := message.ValidateTopic(name); err != nil {
		h.writeError(w, err)
		return
	}
	ts, err := h.eng.DescribeTopic(name)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, visibleGroups(topicOf(ts), principalOf(r)))
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request) {
	s := h.eng.Stats()
	_, n, _ := s.Lateness.Snapshot()
	out := api.Stats{
		Pending: s.Pending.Load(), Sent: s.Sent.Load(), Fired: s.Fired.Load(),
		Cancelled: s.Cancelled.Load(), Rescheduled: s.Rescheduled.Load(),
		LatenessCount: n, RecoverySeconds: s.RecoveryDuration(), ClockJumps: s.ClockJumps.Load(),
	}
	if n > 0 {
		out.LatenessP50Ms = quantileMs(s.Lateness, 0.5)
		out.LatenessP99Ms = quantileMs(s.Lateness, 0.99)
	}
	writeJSON(w, http.StatusOK, out)
}

// quantileMs returns the q-quantile of a seconds histogram in ms, nil when
// it lies above the largest bucket.
func quantileMs(hist *engine.Histogram, q float64) *float64 {
	v := hist.Quantile(q)
	if math.IsInf(v, 0) {
		return nil
	}
	ms := v * 1000
	return &ms
}

// Consumer groups.

func (h *Handler) createGroup(w http.ResponseWriter, r *http.Request) {
	var in api.GroupConfig
	if err := h.decode(w, r, &in, true); err != nil {
		h.writeError(w, err)
		return
	}
	cfg := engine.GroupConfig{MaxAttempts: in.MaxAttempts}
	var err error
	if cfg.BackoffBase, err = positiveDurationField("backoff_base", in.BackoffBase); err != nil {
		h.writeError(w, err)
		return
	}
	if cfg.BackoffMax, err = positiveDurationField("backoff_max", in.BackoffMax); err != nil {
		h.writeError(w, err)
		return
	}
	topic, name := pathTopic(r), r.PathValue("group")
	if err := h.eng.GroupAdmin().Create(topic, name, cfg); err != nil {
		h.writeError(w, err)
		return
	}
	gs, err := h.eng.Groups(topic)
	if err != nil {
		h.writeError(w, err)
		return
	}
	for _, g := range gs {
		if g.Name == name {
			writeJSON(w, http.StatusCreated, groupOf(g))
			return
		}
	}
	h.writeError(w, errs.New(errs.Internal, "group %q of topic %q was created but is not listed", name, topic))
}

func (h *Handler) listGroups(w http.ResponseWriter, r *http.Request) {
	gs, err := h.eng.Groups(pathTopic(r))
	if err != nil {
		h.writeError(w, err)
		return
	}
	out := api.GroupList{Groups: make([]api.Group, 0, len(gs))}
	p, topic := principalOf(r), pathTopic(r)
	for _, g := range gs {
		if !p.SeesGroup(topic, g.Name) {
			continue
		}
		out.Groups = append(out.Groups, groupOf(g))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) nack(w http.ResponseWriter, r *http.Request) {
	var in api.NackRequest
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	if in.Receipt == "" {
		h.writeError(w, errs.New(errs.InvalidArgument, "receipt is required"))
		return
	}
	delay, err := durationField("delay", in.Delay)
	if err != nil {
		h.writeError(w, err)
		return
	}
	if err := h.eng.Nack(r.Context(), pathTopic(r), r.PathValue("group"), in.Receipt, delay); err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Empty{})
}

func (h *Handler) invisibility(w http.ResponseWriter, r *http.Request) {
	var in api.InvisibilityRequest
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	if in.Receipt == "" {
		h.writeError(w, errs.New(errs.InvalidArgument, "receipt is required"))
		return
	}
	if in.Invisible == "" {
		h.writeError(w, errs.New(errs.InvalidArgument, "invisible is required"))
		return
	}
	d, err := durationField("invisible", in.Invisible)
	if err != nil {
		h.writeError(w, err)
		return
	}
	if err := h.eng.ChangeInvisibility(r.Context(), pathTopic(r), r.PathValue("group"), in.Receipt, d); err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Empty{})
}

func (h *Handler) redrive(w http.ResponseWriter, r *http.Request) {
	var in api.RedriveRequest
	if err := h.decode(w, r, &in, true); err != nil {
		h.writeError(w, err)
		return
	}
	if in.Max == 0 {
		in.Max = api.DefaultRedrive
	}
	n, err := h.eng.Redrive(r.Context(), pathTopic(r), r.PathValue("group"), in.Max)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RedriveResponse{Redriven: n})
}
