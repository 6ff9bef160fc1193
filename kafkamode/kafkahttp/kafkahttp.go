// Package kafkahttp is the HTTP API of a Kafka mode worker (hourglass
// kafka --listen): the embedded broker's request and response shapes
// (package api) over the delay topic, so that `hourglass send`, inspect,
// cancel, reschedule and forecast work against a worker unchanged.
//
// Every write is a record produced to the delay topic (acks=all,
// idempotent), in the partition the worker semantics need:
//
//	POST   /v1/topics/{topic}/messages    send: a record with _deliverAt and
//	                                      _bizTopic={topic}, partitioned by key
//	                                      (murmur2, as Kafka's clients do)
//	DELETE /v1/messages/{id}              cancel: _cancel=offset:<o> in the
//	                                      message's partition
//	POST   /v1/messages/{id}/reschedule   a copy of the message with
//	                                      _cancel=offset:<o> and the new time, in
//	                                      its partition: a new message ID
//	DELETE /v1/keys/{key}                 cancel every pending message with the
//	                                      key: _cancel=key in the key's partition
//
// and every read comes from what is committed in Kafka (see
// kafkamode.Locator), except the forecast, which is the answering worker's
// own index:
//
//	GET /v1/messages/{id}                 where it is and when it fires
//	GET /v1/topics/{topic}/keys/{key}     the same for the latest pending
//	                                      message with the key
//	GET /v1/forecast                      pending counts per bucket, for the
//	                                      partitions this worker owns
//	GET /healthz, GET /metrics
//
// A message ID is "k:<partition>:<offset>": the delay record's position,
// unique and never reused (offsets only grow).
//
// A cancel writes its record, then waits (up to 5 s) until the owning
// worker has applied it, that is, until the record is resolved in the
// committed progress. A cancel by ID then answers 200 cancelled, or 409
// when the worker forwarded the message before the cancel took effect; a
// cancel by key answers 200 cancelled (every message with the key still
// pending then is cancelled). When the worker does not apply it in time
// (it is down, or far behind), the answer is 202 cancel_requested: the
// record is durable and will be applied.
package kafkahttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/internal/buildinfo"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// Options configure a Handler; the zero value is usable.
type Options struct {
	// Access holds the principals and their rules (package access); nil
	// means the store of AuthToken alone.
	Access *access.Store
	// Audit records message-management requests and every refusal; nil
	// records nothing.
	Audit *access.Audit
	// AuthToken, if set and Access is nil, is the bearer token every
	// request but /healthz and /metrics must carry.
	AuthToken string
	// MaxRequestBytes bounds a request body; zero means 1 MiB (Kafka's
	// default largest record).
	MaxRequestBytes int64
	// Metrics serves GET /metrics; nil answers 404.
	Metrics http.Handler
	// Logger receives a line per failed request; nil discards.
	Logger *slog.Logger
	// Now is the clock of due times; nil is time.Now.
	Now func() time.Time
}

// Forecaster is what the forecast needs of a worker (kafkamode.Worker).
type Forecaster interface {
	Forecast(ctx context.Context, p forecast.Plan) (kafkamode.IndexForecast, error)
}

// Handler serves the Kafka-mode HTTP API. Create it with New; Close it
// after the server stopped.
type Handler struct {
	cfg  kafkamode.Config
	opts Options
	fc   Forecaster
	cl   *kgo.Client // producer (manual partitioner) and metadata
	adm  *kadm.Client
	loc  *kafkamode.Locator
	mux  *http.ServeMux

	// changeMu serializes the changes of a delay partition (see
	// reschedule): partition p takes changeMu[p % len]. A fixed set, since
	// a request may name any partition number before it is checked.
	changeMu [64]sync.Mutex

	// parts caches the delay topic's partition count for partitionsTTL.
	mu      sync.Mutex
	parts   int
	partsAt time.Time
}

// partitionsTTL is how long a partition count is trusted.
const partitionsTTL = 10 * time.Second

// New returns the API of the worker configured by cfg (Worker.Config);
// fc answers forecasts (the worker itself). It connects lazily.
func New(cfg kafkamode.Config, fc Forecaster, opts Options) (*Handler, error) {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(kafkamode.MaxBatchBytes))
	if err != nil {
		return nil, err
	}
	if opts.Access == nil {
		// A token alone cannot make Open fail: no file is read.
		opts.Access, _ = access.Open(access.Options{AuthToken: opts.AuthToken, Logger: opts.Logger})
	}
	h := &Handler{cfg: cfg, opts: opts, fc: fc, cl: cl, adm: kadm.NewClient(cl), loc: kafkamode.NewLocator(cfg, cl), mux: http.NewServeMux()}
	for _, rt := range h.routes() {
		serve, need := rt.serve, rt.need
		h.mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			done, err := h.permit(r, need)
			if err == nil {
				err = serve(w, r)
				done(err)
			}
			if err != nil {
				h.writeError(w, r, err)
			}
		})
	}
	h.mux.HandleFunc("/", h.noRoute)
	return h, nil
}

// route is one operation of the API: its ServeMux pattern ("METHOD
// /path") and its handler. docs/openapi-kafka.yaml documents exactly these
// (a test checks it).
type route struct {
	pattern string
	serve   func(http.ResponseWriter, *http.Request) error
	// need is the permission the route needs (access.go); nil: none.
	need needFunc
}

// routes is the API's operations.
func (h *Handler) routes() []route {
	return []route{
		{"POST /v1/topics/{topic}/messages", h.send, onTopic(access.Send)},
		{"GET /v1/messages/{id}", h.inspect, everyTopic},
		{"DELETE /v1/messages/{id}", h.cancel, everyTopic},
		{"POST /v1/messages/{id}/reschedule", h.reschedule, everyTopic},
		{"GET /v1/topics/{topic}/keys/{key}", h.inspectKey, onTopic(access.Manage)},
		{"DELETE /v1/keys/{key}", h.cancelKey, everyTopic},
		{"GET /v1/forecast", h.forecast, fixed(access.Metrics, access.ResForecast)},
		{"GET /healthz", h.healthz, nil},
		{"GET /metrics", h.metrics, fixed(access.Metrics, access.ResMetrics)},
	}
}

// noRoute answers what no route matches: 405 with Allow when the path
// exists with other methods (as the embedded API does), else 404.
func (h *Handler) noRoute(w http.ResponseWriter, r *http.Request) {
	allow := api.AllowedMethods(h.mux, r)
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, api.Error{Error: api.ErrorBody{Code: errs.InvalidArgument,
			Message: fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))}})
		return
	}
	h.writeError(w, r, errs.New(errs.NotFound, "no such endpoint in Kafka mode: %s %s (Kafka mode serves send, inspect, cancel, reschedule, forecast, /healthz and /metrics)", r.Method, r.URL.Path))
}

// Close releases the Kafka client.
func (h *Handler) Close() { h.cl.Close() }

// crossOrigin refuses writes a browser makes from another site.
var crossOrigin = http.NewCrossOriginProtection()

// ServeHTTP authenticates and dispatches.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := crossOrigin.Check(r); err != nil {
		h.writeError(w, r, errs.New(errs.Unauthenticated, "cross-origin %s refused: %v", r.Method, err))
		return
	}
	// Every path but /healthz needs credentials, before routing, so that
	// no spelling of a path slips past.
	var p *access.Principal
	var err error
	switch r.URL.Path {
	case "/healthz":
		p = access.Anonymous
	case "/metrics":
		p, err = h.opts.Access.FromMetricsRequest(r)
	default:
		p, err = h.opts.Access.FromRequest(r)
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hourglass"`)
		h.writeError(w, r, errs.New(errs.Unauthenticated, "%v: send the header Authorization: Bearer <name>:<secret> (or the -auth-token)", err))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), principalKey{}, p), requestTimeout)
	defer cancel()
	h.mux.ServeHTTP(w, r.WithContext(ctx))
}

// requestTimeout bounds a request's work in Kafka (a produce, an inspect's
// reads): past it the answer is unavailable (503), not a hung request.
const requestTimeout = 30 * time.Second

// writeError answers err in the API's error shape with its code's status.
// Errors that are not *errs.Error come from Kafka or the context: Kafka's
// are unavailable (503: retry), a record too large is too_large.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := errs.CodeOf(err), err.Error()
	if _, ok := errors.AsType[*errs.Error](err); !ok {
		switch {
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			code, msg = errs.Unavailable, "request cancelled or timed out: "+msg
		case errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge):
			code = errs.TooLarge
		case errors.Is(err, kafkamode.ErrNoMessage):
			code = errs.NotFound
		default:
			code, msg = errs.Unavailable, "Kafka: "+msg
		}
	}
	if api.Status(code) >= 500 {
		h.opts.Logger.Warn("http request failed", "method", r.Method, "path", r.URL.Path, "code", code, "error", msg)
	}
	writeJSON(w, api.Status(code), api.Error{Error: api.ErrorBody{Code: code, Message: msg}})
}

// healthz answers liveness with the running build.
func (h *Handler) healthz(w http.ResponseWriter, _ *http.Request) error {
	b := buildinfo.Get()
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: b.Version, Commit: b.Commit, BuildDate: b.Date,
		GoVersion: b.GoVersion, Clock: api.ClockSystem})
	return nil
}

func (h *Handler) metrics(w http.ResponseWriter, r *http.Request) error {
	if h.opts.Metrics == nil {
		return errs.New(errs.NotFound, "metrics are not enabled")
	}
	h.opts.Metrics.ServeHTTP(w, r)
	return nil
}

// partitions returns the delay topic's partition count (cached).
func (h *Handler) partitions(ctx context.Context) (int, error) {
	h.mu.Lock()
	n, at := h.parts, h.partsAt
	h.mu.Unlock()
	if n > 0 && time.Since(at) < partitionsTTL {
		return n, nil
	}
	td, err := h.adm.ListTopics(ctx, h.cfg.DelayTopic)
	if err != nil {
		return 0, err
	}
	d, ok := td[h.cfg.DelayTopic]
	if !ok || d.Err != nil || len(d.Partitions) == 0 {
		return 0, errs.New(errs.Unavailable, "the delay topic %s does not exist yet (the worker creates it when it starts)", h.cfg.DelayTopic)
	}
	h.mu.Lock()
	h.parts, h.partsAt = len(d.Partitions), time.Now()
	h.mu.Unlock()
	return len(d.Partitions), nil
}

// produce writes r to the delay topic (r.Partition set) and returns its
// message ID.
func (h *Handler) produce(ctx context.Context, r *kgo.Record) (string, error) {
	r.Topic = h.cfg.DelayTopic
	if err := h.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return "", err
	}
	return FormatID(r.Partition, r.Offset), nil
}

// FormatID is the message ID of the delay record at (partition, offset).
func FormatID(partition int32, offset int64) string {
	return "k:" + strconv.Itoa(int(partition)) + ":" + strconv.FormatInt(offset, 10)
}

// ParseID reads a message ID "k:<partition>:<offset>".
func ParseID(id string) (partition int32, offset int64, err error) {
	bad := func(why string) error {
		return errs.New(errs.InvalidArgument, "message ID %q is not a Kafka-mode ID k:<partition>:<offset> (%s)", id, why)
	}
	rest, ok := strings.CutPrefix(id, "k:")
	ps, os, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return 0, 0, bad("want the prefix k: and two numbers")
	}
	if !decimal(ps) || !decimal(os) {
		return 0, 0, bad("partition and offset are decimal numbers without sign or leading zeros")
	}
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, bad("a number is out of range")
	}
	return int32(p), o, nil
}

// decimal reports whether s is a canonical non-negative decimal number.
func decimal(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// resolvedError says why a message cannot be cancelled or rescheduled.
func resolvedError(id string, loc kafkamode.Location) error {
	return errs.New(errs.FailedPrecondition, "message %s is %s already (committed): it can no longer be cancelled or rescheduled", id, loc.Where)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = jsonEncode(w, v)
}

// errorf is errs.New for invalid_argument.
func errorf(format string, args ...any) error { return errs.New(errs.InvalidArgument, format, args...) }
