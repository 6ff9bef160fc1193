package kafkahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// controlHeaders are the headers a message's properties must not name: the
// worker reads them (the underscore ones) or sets them (hourglass-*).
var controlHeaders = []string{kafkamode.HeaderDeliverAt, kafkamode.HeaderDelayMs, kafkamode.HeaderBizTopic,
	kafkamode.HeaderCancel}

func isControl(name string) bool {
	for _, c := range controlHeaders {
		if name == c {
			return true
		}
	}
	return false
}

// rescheduleMargin is how close to its due time a message may still be
// rescheduled: a reschedule is a new record that cancels the old one, and
// if the worker forwarded the old one first both would be delivered.
const rescheduleMargin = time.Second

// unsent is the round-robin counter of messages without a key.
var unsent atomic.Uint32

// send serves POST /v1/topics/{topic}/messages: produce a delay record
// for the business topic {topic}.
func (h *Handler) send(w http.ResponseWriter, r *http.Request) error {
	topic, err := h.pathTopic(r)
	if err != nil {
		return err
	}
	var req sendRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	m := req.SendMessage
	if m.Properties, err = req.properties(); err != nil {
		return err
	}
	for name, set := range map[string]bool{"tag": m.Tag != "", "group": m.Group != "", "dedup_id": m.DedupID != "",
		"deadline": m.Deadline != 0, "ttl": m.TTL != "", "window": m.Window != 0, "level": m.Level != 0} {
		if set {
			return errorf("field %q is not supported in Kafka mode (supported: key, properties, body, body_base64, delay, at)", name)
		}
	}
	var body []byte
	switch {
	case m.Body != nil && m.BodyBase64 != nil:
		return errorf("give body or body_base64, not both")
	case m.Body != nil:
		body = []byte(*m.Body)
	case m.BodyBase64 != nil:
		if body, err = base64.StdEncoding.Strict().DecodeString(*m.BodyBase64); err != nil {
			return errorf("body_base64 is not standard base64: %v", err)
		}
	}
	now := h.opts.Now().UnixMilli()
	due, err := dueOf(m.Delivery, now)
	if err != nil {
		return err
	}
	rec := &kgo.Record{Value: body, Timestamp: time.UnixMilli(now)}
	names := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		switch {
		case k == "":
			return errorf("a property name is empty")
		case isControl(k) || kafkamode.IsOwnHeader(k):
			return errorf("property %q is reserved in Kafka mode (the control headers %v and the hourglass-* headers the worker sets)", k, controlHeaders)
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(m.Properties[k])})
	}
	rec.Headers = append(rec.Headers, schedule(due, topic)...)
	n, err := h.partitions(r.Context())
	if err != nil {
		return err
	}
	if m.Key != "" {
		rec.Key = []byte(m.Key)
		rec.Partition = kafkamode.KeyPartition(rec.Key, n)
	} else {
		rec.Partition = int32(unsent.Add(1) % uint32(n))
	}
	id, err := h.produce(r.Context(), rec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Receipt{ID: id, Topic: topic, Queue: int(rec.Partition), Due: api.Millis(due), DueTime: api.Millis(due).RFC3339()})
	return nil
}

// sendRequest decodes a send: api.SendMessage, but with the properties'
// values as pointers (the shallower field wins in encoding/json), so that
// a null value is refused as the embedded API refuses it instead of being
// read as "" (docs/openapi-kafka.yaml: a property value is a string).
type sendRequest struct {
	api.SendMessage
	Properties map[string]*string `json:"properties,omitempty"`
}

// properties returns the request's properties; a null value is an error.
func (s *sendRequest) properties() (map[string]string, error) {
	if s.Properties == nil {
		return nil, nil
	}
	out := make(map[string]string, len(s.Properties))
	for k, v := range s.Properties {
		if v == nil {
			return nil, errorf("property %q is null: a property value is a string", k)
		}
		out[k] = *v
	}
	return out, nil
}

// schedule is the control headers of a record due at due for bizTopic.
func schedule(due int64, bizTopic string) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: kafkamode.HeaderDeliverAt, Value: strconv.AppendInt(nil, due, 10)},
		{Key: kafkamode.HeaderBizTopic, Value: []byte(bizTopic)},
	}
}

// dueOf is the due time a Delivery asks for at now: now when it asks
// none; an absolute time in the past is now too.
func dueOf(d api.Delivery, now int64) (int64, error) {
	if d.Level != 0 {
		return 0, errorf("field \"level\" is not supported in Kafka mode (there is no delay-level table): give delay or at")
	}
	if d.Delay != "" && d.At != 0 {
		return 0, errorf("give delay or at, not both")
	}
	switch {
	case d.Delay != "":
		dd, err := time.ParseDuration(d.Delay)
		if err != nil {
			return 0, errorf("delay %q is not a duration such as 250ms, 30s or 1h30m", d.Delay)
		}
		if dd < 0 || dd.Milliseconds() > kafkamode.MaxDelayMs {
			return 0, errorf("delay %q is out of range (0 to 100 years)", d.Delay)
		}
		// Rounded up, as the embedded engine does: a truncated delay
		// would be due up to a millisecond early.
		return now + (dd + time.Millisecond - 1).Milliseconds(), nil
	case d.At < 0:
		return 0, errorf("at %d is before the Unix epoch", d.At)
	case int64(d.At) > now+kafkamode.MaxDelayMs:
		return 0, errorf("at %d is more than 100 years ahead", d.At)
	}
	return max(int64(d.At), now), nil
}

// inspect serves GET /v1/messages/{id}.
func (h *Handler) inspect(w http.ResponseWriter, r *http.Request) error {
	p, o, err := h.pathID(r)
	if err != nil {
		return err
	}
	loc, err := h.loc.Locate(r.Context(), p, o, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, infoOf(loc))
	return nil
}

// inspectKey serves GET /v1/topics/{topic}/keys/{key}: the latest pending
// message with the key for the topic.
func (h *Handler) inspectKey(w http.ResponseWriter, r *http.Request) error {
	topic, err := h.pathTopic(r)
	if err != nil {
		return err
	}
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	n, err := h.partitions(r.Context())
	if err != nil {
		return err
	}
	p := kafkamode.KeyPartition(key, n)
	o, ok, err := h.loc.LatestPending(r.Context(), p, key, topic)
	if err != nil {
		return err
	}
	if !ok {
		return errs.New(errs.NotFound, "no pending message with key %q for topic %s in delay partition %d (Kafka mode searches the messages not yet resolved: a forwarded or cancelled one is found by its ID)", key, topic, p)
	}
	loc, err := h.loc.Locate(r.Context(), p, o, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, infoOf(loc))
	return nil
}

// infoOf renders a Location.
func infoOf(loc kafkamode.Location) api.KafkaMessageInfo {
	rec := loc.Record
	in := api.KafkaMessageInfo{MessageInfo: api.MessageInfo{
		ID: FormatID(loc.Partition, loc.Offset), State: api.State(loc.Where), Topic: loc.BizTopic, Queue: int(loc.Partition),
		Key: string(rec.Key), Due: api.Millis(loc.Due), Sent: api.MillisOf(rec.Timestamp), Visible: api.Millis(loc.Forwarded),
		BodyBytes: len(rec.Value),
	}, Reason: loc.Problem, CommittedOffset: loc.Committed}
	if loc.Copied {
		in.ID, in.CopyID = FormatID(loc.Partition, loc.Origin), in.ID
	}
	if loc.Due != 0 {
		in.DueTime = api.Millis(loc.Due).RFC3339()
	}
	for _, hd := range rec.Headers {
		if isControl(hd.Key) || hd.Key == kafkamode.HeaderCopiedFrom { // the worker's, not the message's
			continue
		}
		if in.Properties == nil {
			in.Properties = map[string]string{}
		}
		in.Properties[hd.Key] = string(hd.Value)
	}
	return in
}

// maxForecastMs bounds a forecast's from and to (Unix ms): the end of the
// year 9999, as docs/openapi-kafka.yaml says, and far from int64's end, so
// that the default "to" (from plus an hour) cannot overflow.
const maxForecastMs = 253_402_300_799_999

// forecastWait bounds how long a forecast waits for the worker's loop.
const forecastWait = 5 * time.Second

// forecast serves GET /v1/forecast?from=&to=&step= over the worker's
// index, with the embedded API's parameters and defaults (from now, for
// an hour, by the minute).
func (h *Handler) forecast(w http.ResponseWriter, r *http.Request) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return errorf("query %q is malformed: %v", r.URL.RawQuery, err)
	}
	for k, vs := range q {
		switch {
		case k == "topic":
			return errorf("query parameter \"topic\" is not supported in Kafka mode: the worker counts the delay topic's messages whatever their business topic")
		case k != "from" && k != "to" && k != "step":
			return errorf("query parameter %q is not accepted; the parameters are from, to and step", k)
		case len(vs) > 1:
			return errorf("query parameter %q is given %d times", k, len(vs))
		}
	}
	millis := func(name string, def int64) (int64, error) {
		if !q.Has(name) {
			return def, nil
		}
		v, err := strconv.ParseInt(q.Get(name), 10, 64)
		if err != nil || v < 0 || v > maxForecastMs {
			return 0, errorf("%s %q is not a time in Unix milliseconds (an integer from 0 to %d)", name, q.Get(name), int64(maxForecastMs))
		}
		return v, nil
	}
	from, err := millis("from", h.opts.Now().UnixMilli())
	if err != nil {
		return err
	}
	to, err := millis("to", from+time.Hour.Milliseconds())
	if err != nil {
		return err
	}
	step := time.Minute
	if q.Has("step") {
		if step, err = forecast.ParseStep(q.Get("step")); err != nil {
			return errorf("%s", err.Error())
		}
	}
	plan, err := forecast.NewPlan(from, to, step)
	if err != nil {
		return errorf("%s", err.Error())
	}
	ctx, cancel := context.WithTimeout(r.Context(), forecastWait)
	defer cancel()
	f, err := h.fc.Forecast(ctx, plan)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "forecast")
	}
	out := api.KafkaForecast{Forecast: api.Forecast{StepSeconds: plan.Step, Buckets: make([]api.ForecastBucket, len(f.Buckets))},
		Partitions: f.Partitions, Pending: f.Pending}
	if out.Partitions == nil {
		out.Partitions = []int32{}
	}
	for i, b := range f.Buckets {
		start := api.Millis(b.Start)
		out.Buckets[i] = api.ForecastBucket{Start: start, End: api.Millis(b.End), StartTime: start.RFC3339(), Count: b.Count}
		out.Total += b.Count
	}
	out.From, out.To = api.Millis(plan.From*1000), api.Millis(plan.To*1000)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pathTopic returns the {topic} path value: a valid Kafka topic name other
// than the worker's own topics.
func (h *Handler) pathTopic(r *http.Request) (string, error) {
	t := r.PathValue("topic")
	if err := kafkamode.CheckTopic(t); err != nil {
		return "", errs.New(errs.InvalidArgument, "topic: %v", err)
	}
	if t == h.cfg.DelayTopic || t == h.cfg.StateTopic || t == h.cfg.DLQTopic {
		return "", errorf("topic %s is one of the worker's own topics (delay, state, dead-letter), not a business topic", t)
	}
	if r.URL.RawQuery != "" {
		return "", errorf("query %q is not accepted: %s takes no query parameters", r.URL.RawQuery, r.Pattern)
	}
	return t, nil
}

// pathID returns the {id} path value as a partition and an offset.
func (h *Handler) pathID(r *http.Request) (int32, int64, error) {
	if r.URL.RawQuery != "" {
		return 0, 0, errorf("query %q is not accepted: %s takes no query parameters", r.URL.RawQuery, r.Pattern)
	}
	return ParseID(r.PathValue("id"))
}

// pathKey returns the {key} path value: non-empty UTF-8.
func pathKey(r *http.Request) ([]byte, error) {
	k := r.PathValue("key")
	switch {
	case k == "":
		return nil, errorf("the key is empty")
	case !utf8.ValidString(k):
		return nil, errorf("key %q is not valid UTF-8", k)
	}
	return []byte(k), nil
}

// decode reads the request body, at most MaxRequestBytes, as exactly one
// JSON object into v, refusing unknown fields.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes))
	if err != nil {
		if tooBig, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return errs.New(errs.TooLarge, "request body exceeds the limit of %d bytes", tooBig.Limit)
		}
		return errs.Wrap(errs.InvalidArgument, err, "cannot read the request body")
	}
	trimmed := bytes.Trim(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errorf("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return errorf("unknown field %s in the request body", f)
		}
		return errorf("request body is not valid: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf("request body holds data after the JSON object; send exactly one JSON value")
	}
	return nil
}

// jsonEncode writes v as one line of JSON.
func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
