package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/schedule"
)

// Options are the settings of the HTTP API: who may call it, how large and
// how slow a request may be, and the parts of the broker beside the engine
// that some routes serve. Package broker maps `hourglass serve`'s flags
// onto them (broker.Config.ServerOptions); the flag of each is named in its
// doc, and error messages name that flag.
type Options struct {
	// DataDir is the broker's data directory: a backup reads StateFiles
	// from it.
	DataDir string
	// StateFiles are the files, relative to DataDir, that the broker's
	// other parts (not the engine) write and a backup must carry: the
	// schedules' journal, the virtual-clock marker, the remoting offsets.
	// They are read before the engine fixes the end of the log it copies
	// and written into the copy before its rename (engine.BackupWith).
	StateFiles []string
	// BackupDir is the directory under which POST /v1/admin/backup may
	// write (-backup-dir); empty disables the route.
	BackupDir string
	// AuthToken, when not empty, is the bearer token of every /v1 request
	// (-auth-token); MetricsToken, when not empty, that of /metrics
	// (-metrics-token), which AuthToken also opens.
	AuthToken, MetricsToken string
	// Access holds the principals and their rules (-credentials, package
	// access), the tokens included; nil means a store of AuthToken and
	// MetricsToken alone.
	Access *access.Store
	// Audit records admin and message-management requests and every
	// refusal (-audit-log); nil records nothing.
	Audit *access.Audit
	// AutoCreateTopics lets a schedule name a topic that does not exist
	// yet (-auto-create-topics), as a send may.
	AutoCreateTopics bool
	// MaxBatch bounds the messages of one batch send (-max-batch).
	MaxBatch int
	// MaxStreams bounds the streams (receive and send) open at once
	// (-max-streams).
	MaxStreams int
	// MaxRequestBytes bounds any request's body (-max-request-bytes).
	MaxRequestBytes int64
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound a
	// connection (the flags of the same names); MaxHeaderBytes bounds a
	// request's line and headers (-max-header-bytes). WriteTimeout is at
	// least MinWriteTimeout.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int64

	// Virtual is the broker's virtual clock (-clock virtual), which POST
	// /v1/clock/advance moves; nil on the system clock.
	Virtual *clock.Virtual
	// Schedules runs the recurring schedules; nil answers the schedule
	// routes with unavailable.
	Schedules *schedule.Runner
}

// MinWriteTimeout is the smallest WriteTimeout accepted: the longest
// long-poll wait plus a margin to answer it.
const MinWriteTimeout = engine.MaxReceiveWait + 5*time.Second

// DefaultOptions returns the HTTP API's defaults, which are also
// `hourglass serve`'s (broker.DefaultConfig takes them from here).
func DefaultOptions() Options {
	return Options{
		AutoCreateTopics:  !engine.NewOptions("").NoAutoCreate,
		MaxBatch:          engine.NewOptions("").MaxBatch,
		MaxStreams:        1000,
		MaxRequestBytes:   8 << 20,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    256 << 10,
	}
}

// NewHTTPServer returns the server of h with every connection bounded by
// o: the time to send headers and a whole request, to handle and answer
// it, to wait idle between requests, and the size of the headers.
func NewHTTPServer(h http.Handler, o Options, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    int(o.MaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
