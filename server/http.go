package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/internal/buildinfo"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/schedule"
)

// Handler serves the HTTP API over one engine. Create it with New.
type Handler struct {
	eng     *engine.Engine
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	metrics http.Handler
	// access decides who may do what; audit records it (access.go).
	access *access.Store
	audit  *access.Audit
	// virtual is the broker's virtual clock (-clock virtual); nil on the
	// system clock.
	virtual *clock.Virtual
	// schedules runs the recurring schedules; nil when the broker runs
	// none.
	schedules *schedule.Runner

	// draining is cancelled by Drain: long-poll receives end at once.
	draining context.Context
	drain    context.CancelFunc
	// streams holds a token for every stream open, receive or send (at
	// most opts.MaxStreams), taken until its handler returns, so that the
	// broker's shutdown can wait for them to give back what they leased
	// ahead, and to answer the sends they have in flight, before it
	// closes the engine (WaitStreams).
	streams chan struct{}
}

// route is one endpoint of the API. The table is the single source of the
// routes: New registers it and the OpenAPI test checks the document
// against it.
type route struct {
	method, path string
	serve        func(h *Handler, w http.ResponseWriter, r *http.Request)
	// need is the route's permission (access.go); nil: any principal.
	need need
}

var routes = []route{
	{"POST", "/v1/topics/{topic}/messages", (*Handler).send, onTopic(access.Send)},
	{"POST", "/v1/topics/{topic}/batch", (*Handler).sendBatch, onTopic(access.Send)},
	{"POST", "/v1/topics/{topic}/stream", (*Handler).sendStream, onTopic(access.Send)},
	{"GET", "/v1/messages/{id}", (*Handler).inspect, byMessage},
	{"DELETE", "/v1/messages/{id}", (*Handler).cancel, byMessage},
	{"POST", "/v1/messages/{id}/reschedule", (*Handler).reschedule, byMessage},
	{"GET", "/v1/topics/{topic}/keys/{key}", (*Handler).inspectKey, onTopic(access.Manage)},
	{"PUT", "/v1/topics/{topic}", (*Handler).createTopic, adminTopic},
	{"GET", "/v1/topics", (*Handler).listTopics, nil},
	{"GET", "/v1/topics/{topic}", (*Handler).describeTopic, seesTopic},
	{"PUT", "/v1/topics/{topic}/groups/{group}", (*Handler).createGroup, adminGroup},
	{"GET", "/v1/topics/{topic}/groups", (*Handler).listGroups, seesTopic},
	{"POST", "/v1/topics/{topic}/groups/{group}/receive", (*Handler).receive, onConsumer},
	{"POST", "/v1/topics/{topic}/groups/{group}/stream", (*Handler).stream, onConsumer},
	{"POST", "/v1/topics/{topic}/groups/{group}/ack", (*Handler).ack, onConsumer},
	{"POST", "/v1/topics/{topic}/groups/{group}/nack", (*Handler).nack, onConsumer},
	{"POST", "/v1/topics/{topic}/groups/{group}/invisibility", (*Handler).invisibility, onConsumer},
	{"POST", "/v1/topics/{topic}/groups/{group}/redrive", (*Handler).redrive, adminGroup},
	{"PATCH", "/v1/topics/{topic}/groups/{group}", (*Handler).setGroupPolicy, adminGroup},
	{"POST", "/v1/topics/{topic}/groups/{group}/pause", (*Handler).pauseGroup, adminGroup},
	{"POST", "/v1/topics/{topic}/groups/{group}/resume", (*Handler).resumeGroup, adminGroup},
	{"POST", "/v1/topics/{topic}/groups/{group}/seek", (*Handler).seekGroup, adminGroup},
	{"PUT", "/v1/schedules/{schedule}", (*Handler).createSchedule, adminSchedule},
	{"GET", "/v1/schedules", (*Handler).listSchedules, nil},
	{"GET", "/v1/schedules/{schedule}", (*Handler).getSchedule, adminSchedule},
	{"DELETE", "/v1/schedules/{schedule}", (*Handler).deleteSchedule, adminSchedule},
	{"POST", "/v1/schedules/{schedule}/pause", (*Handler).pauseSchedule, adminSchedule},
	{"POST", "/v1/schedules/{schedule}/resume", (*Handler).resumeSchedule, adminSchedule},
	{"GET", "/v1/schedules/{schedule}/firings", (*Handler).scheduleFirings, adminSchedule},
	{"GET", "/v1/clock", (*Handler).clockNow, nil},
	{"GET", "/v1/whoami", (*Handler).whoami, nil},
	{"POST", "/v1/clock/advance", (*Handler).clockAdvance, fixed(access.Admin, access.ResClock)},
	{"GET", "/v1/stats", (*Handler).stats, fixed(access.Metrics, access.ResStats)},
	{"POST", "/v1/admin/backup", (*Handler).backup, fixed(access.Admin, access.ResBackup)},
	{"GET", "/v1/admin/damage", (*Handler).damage, fixed(access.Admin, access.ResDamage)},
	{"GET", "/healthz", (*Handler).healthz, nil},
	{"GET", "/metrics", (*Handler).serveMetrics, fixed(access.Metrics, access.ResMetrics)},
	{"GET", "/v1/forecast", (*Handler).forecast, fixed(access.Metrics, access.ResForecast)},
	{"GET", "/v1/messages/{id}/preview", (*Handler).preview, byMessage},
	{"GET", "/v1/pending", (*Handler).listPending, managesListedTopic},
	{"GET", "/v1/topics/{topic}/groups/{group}/inflight", (*Handler).listInFlight, onTopic(access.Manage)},
	{"GET", "/v1/topics/{topic}/groups/{group}/dead", (*Handler).listDead, onTopic(access.Manage)},
	{"POST", "/v1/topics/{topic}/groups/{group}/dead/resend", (*Handler).deadResend, adminGroup},
	{"POST", "/v1/topics/{topic}/groups/{group}/dead/delete", (*Handler).deadDelete, adminGroup},
	{"POST", "/v1/topics/{topic}/groups/{group}/dead/purge", (*Handler).deadPurge, adminGroup},
	{"GET", "/v1/messages/{id}/trail", (*Handler).trail, byMessage},
}

// New returns the HTTP API of eng configured by opts (limits, auth token,
// the virtual clock and the schedules). metrics serves GET /metrics (nil:
// 404). The caller owns eng and closes it after the server has stopped.
func New(eng *engine.Engine, opts Options, logger *slog.Logger, metrics http.Handler) *Handler {
	if logger == nil {
		logger = slog.Default()
	}
	if opts.Access == nil {
		// Tokens alone cannot make Open fail: no file is read.
		opts.Access, _ = access.Open(access.Options{AuthToken: opts.AuthToken, MetricsToken: opts.MetricsToken, Logger: logger})
	}
	h := &Handler{eng: eng, opts: opts, log: logger, mux: http.NewServeMux(), metrics: metrics, access: opts.Access, audit: opts.Audit,
		virtual: opts.Virtual, schedules: opts.Schedules}
	h.draining, h.drain = context.WithCancel(context.Background())
	h.streams = make(chan struct{}, max(opts.MaxStreams, 1))
	for _, rt := range routes {
		serve, wild, need := rt.serve, wildcards(rt.path), rt.need
		h.mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			if err := checkPath(r, wild); err != nil {
				h.writeError(w, err)
				return
			}
			done, err := h.permit(r, need)
			if err != nil {
				closeUnread(w, r)
				h.writeError(w, err)
				return
			}
			serve(h, w, r)
			done(statusOf(w))
		})
	}
	h.mountConsole()
	h.mux.HandleFunc("/", h.noRoute)
	return h
}

// Drain tells the handler that shutdown has begun: waiting long-poll
// receives return at once with what they have. It is idempotent.
func (h *Handler) Drain() { h.drain() }

// WaitStreams waits until no streaming receive's handler runs, for at most
// timeout, and reports whether none does. A stream gives back what it
// leased ahead as its handler returns, and that needs the engine open.
func (h *Handler) WaitStreams(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for len(h.streams) > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// ServeHTTP authenticates, dispatches, and logs the outcome.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", p)
			if rec.status == 0 {
				h.writeError(rec, errs.New(errs.Internal, "internal error: %v", p))
			}
		}
		h.logRequest(r, rec, time.Since(start))
	}()
	if err := checkBrowserWrite(r); err != nil {
		closeUnread(rec, r)
		h.writeError(rec, err)
		return
	}
	// Everything but the open endpoints needs credentials, checked before
	// routing so that no spelling of a /v1 path (unclean, doubled
	// slashes) slips past. What the principal may do is checked per route
	// (access.go).
	p, err := h.authenticate(r)
	if err != nil {
		closeUnread(rec, r)
		realm := "hourglass"
		if r.URL.Path == "/metrics" {
			realm = "hourglass-metrics"
		}
		rec.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
		h.writeError(rec, err)
		return
	}
	h.mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
}

// logRequest logs every request at debug, client errors at warn and
// server errors at error, with the error code and message.
func (h *Handler) logRequest(r *http.Request, rec *recorder, took time.Duration) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	lvl := slog.LevelDebug
	switch {
	case status >= 500:
		lvl = slog.LevelError
	case status >= 400:
		lvl = slog.LevelWarn
	}
	if !h.log.Enabled(r.Context(), lvl) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Duration("duration", took), slog.Int64("bytes", rec.bytes),
	}
	if rec.errCode != "" {
		attrs = append(attrs, slog.String("code", rec.errCode), slog.String("error", rec.errMsg))
	}
	h.log.LogAttrs(r.Context(), lvl, "http request", attrs...)
}

// noRoute answers requests no route matches: 405 with Allow when the path
// exists with other methods, 404 otherwise.
func (h *Handler) noRoute(w http.ResponseWriter, r *http.Request) {
	allow := api.AllowedMethods(h.mux, r)
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		h.writeErrorStatus(w, http.StatusMethodNotAllowed, errs.New(errs.InvalidArgument,
			"method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	h.writeError(w, errs.New(errs.NotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// healthz answers liveness with the running build, so that a probe or an
// operator sees which binary answers (after an upgrade, for instance), and
// the broker's state: ok, degraded (engine.Degraded: failing fire records
// or checkpoints, damage in the log) or failed (stopped).
func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	b := buildinfo.Get()
	health := api.Health{Status: "ok", Version: b.Version, Commit: b.Commit, BuildDate: b.Date, GoVersion: b.GoVersion, Clock: h.clockMode()}
	err := h.eng.Err()
	if err == nil && h.schedules != nil {
		if serr := h.schedules.Err(); serr != nil {
			err = fmt.Errorf("schedules stopped (their journal could not be written; a restart resumes them): %w", serr)
		}
	}
	if err != nil {
		// Stopped after a storage failure: not healthy, whatever else.
		health.Status, health.Error = "failed", err.Error()
		writeJSON(w, http.StatusServiceUnavailable, health)
		return
	}
	// Serving, but not well: 200, so that a probe does not restart a
	// broker a restart would not mend (damage stays on disk, a full disk
	// stays full), and a status that says so.
	if p := h.eng.Degraded(); len(p) > 0 {
		health.Status, health.Problems = "degraded", p
	}
	writeJSON(w, http.StatusOK, health)
}

func (h *Handler) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if h.metrics == nil {
		h.writeError(w, errs.New(errs.NotFound, "metrics are not enabled"))
		return
	}
	h.metrics.ServeHTTP(w, r)
}

// recorder remembers the status, size and error of a response for the
// request log.
type recorder struct {
	http.ResponseWriter
	status  int
	bytes   int64
	errCode string
	errMsg  string
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// wildcards lists the {names} of a route pattern.
func wildcards(pattern string) []string {
	var out []string
	for _, seg := range strings.Split(pattern, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			out = append(out, strings.TrimSuffix(name, "}"))
		}
	}
	return out
}

// checkPath refuses path values the engine would store or look up
// altered or never find: invalid UTF-8 (a percent-encoded byte such as
// %ff decodes to it), and topic and group names that break the naming
// rules, "." and ".." included (ServeMux cleans them only when they are
// not percent-encoded). No /v1 endpoint takes query parameters, so one
// that is given is a mistake, not an option to ignore.
func checkPath(r *http.Request, wild []string) error {
	for _, name := range wild {
		v := r.PathValue(name)
		if !utf8.ValidString(v) {
			return errs.New(errs.InvalidArgument, "path segment {%s} %q is not valid UTF-8", name, v)
		}
		switch name {
		case "topic", "group":
			if err := message.ValidateName(name, v); err != nil {
				return err
			}
		}
	}
	if r.URL.RawQuery != "" && strings.HasPrefix(r.URL.Path, "/v1/") && !queryRoutes[r.Pattern] {
		return errs.New(errs.InvalidArgument, "query %q is not accepted: %s %s takes no query parameters", r.URL.RawQuery, r.Method, r.Pattern)
	}
	return nil
}

// pathTopic returns the {topic} path value.
func pathTopic(r *http.Request) string { return r.PathValue("topic") }

func durationField(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errs.New(errs.InvalidArgument, "%s %q is not a duration such as 250ms, 30s or 1h30m", field, s)
	}
	return d, nil
}

// positiveDurationField is durationField for a setting whose zero value
// means "the default": a given "0s" (or a negative) is refused rather than
// silently read as "not given".
func positiveDurationField(field, s string) (time.Duration, error) {
	d, err := durationField(field, s)
	if err == nil && s != "" && d <= 0 {
		return 0, errs.New(errs.InvalidArgument, "%s %q must be positive; leave it out for the default", field, s)
	}
	return d, err
}

// closeUnread readies the answer to a request refused before its body was
// read: the connection closes after it. Left open, the server would read
// the rest of the body first, and a body that never ends (a stream's ack
// lines) held the answer until -read-timeout cut the read.
func closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}
