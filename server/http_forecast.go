package server

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/message"
)

// queryRoutes are the patterns that take query parameters; checkPath
// refuses a query on every other /v1 route.
var queryRoutes = map[string]bool{"GET /v1/forecast": true, "POST /v1/topics/{topic}/groups/{group}/stream": true,
	"GET /v1/pending": true, "GET /v1/topics/{topic}/groups/{group}/inflight": true, "GET /v1/topics/{topic}/groups/{group}/dead": true,
	"GET /v1/schedules/{schedule}/firings": true}

// Defaults of GET /v1/forecast.
const (
	defaultForecastSpan = time.Hour
	defaultForecastStep = time.Minute
)

// forecast serves GET /v1/forecast?topic=&from=&to=&step=: from and to are
// Unix ms (default now and from + 1h), step a word (second, minute, hour,
// day) or a duration of whole seconds (default 1m), topic empty for all.
func (h *Handler) forecast(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil { // r.URL.Query() would drop the bad part and answer for the rest
		h.writeError(w, errs.New(errs.InvalidArgument, "query %q is malformed: %v", r.URL.RawQuery, err))
		return
	}
	if err := onlyParams(q, "topic", "from", "to", "step"); err != nil {
		h.writeError(w, err)
		return
	}
	topic := q.Get("topic")
	if topic != "" {
		if err := message.ValidateTopic(topic); err != nil {
			h.writeError(w, err)
			return
		}
	}
	from, err := millisParam(q, "from", h.eng.Now())
	if err != nil {
		h.writeError(w, err)
		return
	}
	to, err := millisParam(q, "to", from+defaultForecastSpan.Milliseconds())
	if err != nil {
		h.writeError(w, err)
		return
	}
	step := defaultForecastStep
	if q.Has("step") { // given but empty is a mistake, not the default
		if step, err = forecast.ParseStep(q.Get("step")); err != nil {
			h.writeError(w, errs.New(errs.InvalidArgument, "%s", err.Error()))
			return
		}
	}
	bs, err := h.eng.Forecast(topic, from, to, step)
	if err != nil {
		h.writeError(w, err)
		return
	}
	out := api.Forecast{Topic: topic, StepSeconds: int64(step / time.Second), Buckets: make([]api.ForecastBucket, len(bs))}
	for i, b := range bs {
		start := api.Millis(b.Start)
		out.Buckets[i] = api.ForecastBucket{Start: start, End: api.Millis(b.End), StartTime: start.RFC3339(), Count: b.Count}
		out.Total += b.Count
	}
	out.From, out.To = out.Buckets[0].Start, out.Buckets[len(bs)-1].End
	writeJSON(w, http.StatusOK, out)
}

// onlyParams refuses query parameters other than the allowed ones, and
// any given twice: a misspelt parameter is a mistake, not an option to
// ignore.
func onlyParams(q url.Values, allowed ...string) error {
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return errs.New(errs.InvalidArgument, "query parameter %q is not accepted; the parameters are %v", k, allowed)
		}
		if len(vs) > 1 {
			return errs.New(errs.InvalidArgument, "query parameter %q is given %d times", k, len(vs))
		}
	}
	return nil
}

// millisParam reads a Unix ms query parameter, def when absent.
func millisParam(q url.Values, name string, def int64) (int64, error) {
	s, ok := q[name]
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseInt(s[0], 10, 64)
	if err != nil || v < 0 {
		return 0, errs.New(errs.InvalidArgument, "%s %q is not a time in Unix milliseconds (a non-negative integer)", name, s[0])
	}
	return v, nil
}

// preview serves GET /v1/messages/{id}/preview: the first
// api.MaxPreviewBytes of the body, as text when it is UTF-8.
func (h *Handler) preview(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	b, n, err := h.eng.Peek(id, api.MaxPreviewBytes)
	if err != nil {
		h.writeError(w, err)
		return
	}
	out := api.BodyPreview{ID: id.String(), BodyBytes: n, Truncated: len(b) < n, Base64: base64.StdEncoding.EncodeToString(b)}
	if utf8.Valid(b) || len(b) < n && utf8.Valid(trimPartialRune(b)) {
		s := string(trimPartialRune(b))
		out.Text = &s
	}
	writeJSON(w, http.StatusOK, out)
}

// trimPartialRune drops a rune cut in half at the end of a truncated body.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if utf8.Valid(b[:len(b)-i]) {
			return b[:len(b)-i]
		}
	}
	return b
}
