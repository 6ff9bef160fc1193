package server

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/hourglass-mq/hourglass/engine"
)

// Handler serves the HTTP API over one engine. Create it with New.
type Handler struct {
	eng *engine.Engine
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	// draining is cancelled by Drain: long-poll receives end at once.
	draining context.Context
	drain    context.CancelFunc
}

// New returns the HTTP API of eng configured by cfg (limits, auth token).
// The caller owns eng and closes it after the server has stopped.
func New(eng *engine.Engine, cfg Config, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.Default()
	}
	h := &Handler{eng: eng, cfg: cfg, log: logger, mux: http.NewServeMux()}
	h.draining, h.drain = context.WithCancel(context.Background())
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Drain tells the handler that shutdown has begun: waiting long-poll
// receives return at once with what they have. It is idempotent.
func (h *Handler) Drain() { h.drain() }
