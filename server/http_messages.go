package server

import (
	"encoding/base64"
	"math"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// when converts delivery options. The engine checks that at most one is
// set and that the time is within the maximum delay.
func when(d api.Delivery) (message.When, error) {
	delay, err := durationField("delay", d.Delay)
	if err != nil {
		return message.When{}, err
	}
	if d.Delay != "" && delay == 0 && (d.At != 0 || d.Level != 0) {
		// "delay":"0s" plus another option is still two options.
		return message.When{}, errs.New(errs.InvalidArgument, "give at most one of delay, at and level")
	}
	return message.When{Delay: delay, At: int64(d.At), Level: d.Level}, nil
}

// request converts one message of a send to topic.
func sendRequest(m *api.SendMessage, topic string) (engine.SendRequest, error) {
	msg := message.Message{Topic: topic, Key: m.Key, Tag: m.Tag, Group: m.Group, Properties: m.Properties, DedupID: m.DedupID}
	switch {
	case m.Body != nil && m.BodyBase64 != nil:
		return engine.SendRequest{}, errs.New(errs.InvalidArgument, "give body or body_base64, not both")
	case m.Body != nil:
		msg.Body = []byte(*m.Body)
	case m.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*m.BodyBase64)
		if err != nil {
			return engine.SendRequest{}, errs.New(errs.InvalidArgument, "body_base64 is not standard base64: %v", err)
		}
		msg.Body = b
	}
	w, err := when(m.Delivery)
	if err != nil {
		return engine.SendRequest{}, err
	}
	if w.TTL, err = durationField("ttl", m.TTL); err != nil {
		return engine.SendRequest{}, err
	}
	if m.Window > math.MaxInt64/int64(time.Millisecond) || m.Window < math.MinInt64/int64(time.Millisecond) {
		return engine.SendRequest{}, errs.New(errs.InvalidArgument, "window %d ms is out of range", m.Window)
	}
	w.Deadline, w.Window = int64(m.Deadline), time.Duration(m.Window)*time.Millisecond
	return engine.SendRequest{Message: msg, When: w}, nil
}

func (h *Handler) send(w http.ResponseWriter, r *http.Request) {
	var in api.SendMessage
	body, err := h.readBody(w, r)
	if err == nil && !readSendFast(body, &in) {
		err = decodeBody(body, &in, false)
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	req, err := sendRequest(&in, pathTopic(r))
	if err != nil {
		h.writeError(w, err)
		return
	}
	rc, err := h.eng.Send(r.Context(), req.Message, req.When)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeReceipts(w, []engine.Receipt{rc}, false)
}

func (h *Handler) sendBatch(w http.ResponseWriter, r *http.Request) {
	pooled := takeBatch()
	in := api.BatchRequest{Messages: *pooled}
	defer func() { putBatch(pooled, in.Messages) }()
	body, err := h.readBody(w, r)
	if err == nil && !readBatchFast(body, &in) {
		err = decodeBody(body, &in, false)
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	if len(in.Messages) == 0 {
		h.writeError(w, errs.New(errs.InvalidArgument, "messages is empty; a batch needs at least one message"))
		return
	}
	if len(in.Messages) > h.opts.MaxBatch {
		h.writeError(w, errs.New(errs.TooLarge, "batch has %d messages; the limit is %d (-max-batch)", len(in.Messages), h.opts.MaxBatch))
		return
	}
	topic := pathTopic(r)
	reqs := make([]engine.SendRequest, len(in.Messages))
	for i := range in.Messages {
		req, err := sendRequest(&in.Messages[i], topic)
		if err != nil {
			h.writeError(w, errs.Wrap(errs.CodeOf(err), err, "message %d", i))
			return
		}
		reqs[i] = req
	}
	rcs, err := h.eng.SendBatch(r.Context(), reqs)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeReceipts(w, rcs, true)
}

// pathID parses the {id} path value.
func pathID(r *http.Request) (message.ID, error) {
	return message.ParseID(r.PathValue("id"))
}

func (h *Handler) inspect(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	info, err := h.eng.Inspect(id)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, infoOf(info))
}

func (h *Handler) inspectKey(w http.ResponseWriter, r *http.Request) {
	topic := pathTopic(r)
	if err := message.ValidateTopic(topic); err != nil {
		h.writeError(w, err)
		return
	}
	info, err := h.eng.InspectKey(topic, r.PathValue("key"))
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, infoOf(info))
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	if err := h.eng.Cancel(r.Context(), id); err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Cancelled{ID: id.String(), State: api.StateCancelled})
}

func (h *Handler) reschedule(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	var in api.RescheduleRequest
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	when, err := when(in.Delivery)
	if err != nil {
		h.writeError(w, err)
		return
	}
	if in.IfDue < 0 {
		h.writeError(w, errs.New(errs.InvalidArgument, "if_due %d is negative; it is Unix time in milliseconds", in.IfDue))
		return
	}
	due, err := h.eng.Reschedule(r.Context(), id, when, int64(in.IfDue))
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Rescheduled{ID: id.String(), Due: api.Millis(due), DueTime: api.Millis(due).RFC3339()})
}
