// Package hourglasstest runs an hourglass broker inside a Go test, the way
// net/http/httptest runs an HTTP server: on a temporary directory, on a
// virtual clock, behind a loopback listener, with a connected client.
//
// A test checks "the order closes after 30 minutes" in milliseconds:
//
//	srv := hourglasstest.NewServer(t)
//	srv.Client.Send(ctx, "orders", client.Message{Body: b, When: client.After(30 * time.Minute)})
//	srv.Advance(30 * time.Minute) // returns once the message is visible
//	msgs, _ := srv.Client.Receive(ctx, "orders", "closer", client.ReceiveOptions{})
//
// The broker is the real one (the engine, the HTTP API and the schedule
// runner the binary serves), not a mock: everything but the clock behaves
// as in production. Its time moves only by Advance (or the client's
// AdvanceClock): time.Sleep in a test moves nothing. Everything the
// broker times follows it: due times, schedules, leases (an unacked
// message comes back after an advance past its lease) and backoffs. Long
// polls and the broker's own chores still end in real time, so a receive
// with a wait returns after that wait even if nobody advances the clock.
//
// The data directory is a new temporary directory that Close removes; it
// is marked as a virtual-clock directory, which a production broker
// refuses to open.
package hourglasstest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/broker"
	"github.com/hourglass-mq/hourglass/client"
)

// Server is a broker running in the test's process.
type Server struct {
	// URL is the base URL of the broker's HTTP API, http://127.0.0.1:port.
	URL string
	// Client is a client connected to URL.
	Client *client.Client
	// Config is the configuration the broker runs with.
	Config broker.Config

	tb   testing.TB // nil for Start
	http *httptest.Server
	b    *broker.Embedded
	dir  string
	once sync.Once
	err  error
}

// Option adjusts a Server before it starts.
type Option func(*options)

type options struct {
	logger *slog.Logger
	config func(*broker.Config)
}

// WithLogger sends the broker's logs to l; by default they are discarded.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithConfig lets f change the broker's configuration (limits, dispatch
// rate, ...) before it starts. The data directory and the clock are the
// package's: changes to them are overwritten.
func WithConfig(f func(*broker.Config)) Option { return func(o *options) { o.config = f } }

// NewServer starts a broker for tb and closes it at tb's cleanup. It fails
// tb if the broker cannot start.
func NewServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := Start(opts...)
	if err != nil {
		tb.Fatalf("hourglasstest: %v", err)
	}
	s.tb = tb
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("hourglasstest: close: %v", err)
		}
	})
	return s
}

// Start starts a broker outside a test (an example, a TestMain); the caller
// must Close it.
func Start(opts ...Option) (*Server, error) {
	o := options{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range opts {
		f(&o)
	}
	dir, err := os.MkdirTemp("", "hourglasstest-")
	if err != nil {
		return nil, err
	}
	cfg := broker.DefaultConfig()
	// A test broker needs no fsync per send: nothing here must survive a
	// power loss, and sends are faster without it.
	cfg.Flush = "async"
	if o.config != nil {
		o.config(&cfg)
	}
	cfg.DataDir = dir
	cfg.Clock = api.ClockVirtual
	b, err := broker.OpenEmbedded(cfg, o.logger)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	hs := httptest.NewServer(b.Handler)
	return &Server{URL: hs.URL, Client: client.New(hs.URL, client.WithToken(cfg.AuthToken)), Config: cfg, http: hs, b: b, dir: dir}, nil
}

// Advance moves the broker's clock forward by d and returns the new broker
// time once every message due by then is visible and every schedule has
// sent what fell due. An advance fails only on a bug or a herd that takes
// more than 10 s to dispatch; then Advance fails the test (NewServer) or
// panics (Start). Call it from the test's goroutine.
func (s *Server) Advance(d time.Duration) time.Time {
	if s.tb != nil {
		s.tb.Helper()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ct, err := s.Client.AdvanceClock(ctx, d)
	if err == nil && !ct.Settled {
		err = fmt.Errorf("advance by %v: what fell due was not visible within the broker's wait", d)
	}
	if err != nil {
		if s.tb == nil {
			panic("hourglasstest: " + err.Error())
		}
		s.tb.Fatalf("hourglasstest: %v", err)
	}
	return ct.Now.Time()
}

// Now returns the broker's time.
func (s *Server) Now() time.Time { return time.UnixMilli(s.b.Engine.Now()) }

// Close stops the listener and the broker and removes its directory. It is
// idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.http.Close()
		s.err = s.b.Close()
		if err := os.RemoveAll(s.dir); s.err == nil {
			s.err = err
		}
	})
	return s.err
}
