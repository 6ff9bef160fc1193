package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/server"
)

// Run opens the engine in cfg.DataDir, listens on cfg.Listen and serves the
// HTTP API until ctx is cancelled. Then it shuts down in this order: stop
// accepting connections and end long-poll receives (they answer with what
// they have), let in-flight requests finish for at most cfg.DrainTimeout,
// close the remaining connections, and close the engine, which flushes the
// commit log and writes a final checkpoint. A send answered 200 is durable
// before the answer is written, so the shutdown order loses nothing that
// was acknowledged.
//
// ready, if not nil, is called with the bound address once the listener is
// open and requests are accepted. Run returns nil after a clean shutdown.
func Run(ctx context.Context, cfg Config, logger *slog.Logger, ready func(addr string)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if logger == nil {
		logger = slog.Default()
	}
	sec, err := openSecurity(cfg, logger)
	if err != nil {
		return err
	}
	defer sec.close()
	httpTLS, err := cfg.httpTLS(sec)
	if err != nil {
		return err
	}
	c, err := openCore(cfg, logger)
	if err != nil {
		return err
	}
	eng := c.eng
	ln, g, rm, err := listenAll(cfg, eng, logger, sec)
	if err != nil {
		c.close()
		return err
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { defer close(watched); sec.watch(watchCtx) }()
	defer func() { stopWatch(); <-watched }()
	opts := c.serverOptions(cfg)
	opts.Access, opts.Audit = sec.store, sec.audit
	h := server.New(eng, opts, logger, metricsHandler(eng, g, rm))
	srv := server.NewHTTPServer(h, opts, logger)
	serveErr := serveHTTP(srv, ln, httpTLS, logger)
	addr := ln.Addr().String()
	logListening(logger, cfg, addr)
	// Before ready: a caller told the server is up may use them all.
	startAdapters(cfg, g, rm, logger)
	if ready != nil {
		ready(addr)
	}

	runErr := waitStop(ctx, &serveErr, g, rm, eng)
	logger.Info("shutting down", "drain_timeout", cfg.DrainTimeout)
	h.Drain()
	if g != nil {
		g.stop(cfg.DrainTimeout, logger)
	}
	if rm != nil {
		if err := rm.stop(logger); err != nil && runErr == nil {
			runErr = err
		}
	}
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	if err := srv.Shutdown(drainCtx); err != nil {
		logger.Warn("drain timeout reached; closing the remaining connections", "err", err)
		srv.Close()
	}
	cancel()
	// Closing the connections woke the streams still open; they give
	// back what they leased ahead, which needs the engine.
	if !h.WaitStreams(5 * time.Second) {
		logger.Warn("streams still open at engine close; what they leased ahead comes back when its lease ends")
	}
	if serveErr != nil {
		if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("serve: %w", err)
		}
	}
	if err := c.close(); err != nil {
		logger.Error("engine close failed", "err", err)
		if runErr == nil {
			runErr = fmt.Errorf("close engine: %w", err)
		}
	}
	logger.Info("stopped")
	return runErr
}

// listenAll opens the listeners of the HTTP API, the gRPC service and the
// remoting protocol (either of the last two may be nil: disabled); on an
// error it closes what it opened.
func listenAll(cfg Config, eng *engine.Engine, logger *slog.Logger, sec *security) (net.Listener, *grpcService, *remotingService, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	g, err := newGRPC(cfg, eng, logger, sec)
	if err != nil {
		ln.Close()
		return nil, nil, nil, err
	}
	rm, err := newRemoting(cfg, eng, logger, sec)
	if err != nil {
		ln.Close()
		if g != nil {
			g.ln.Close()
		}
		return nil, nil, nil, err
	}
	return ln, g, rm, nil
}

// logListening logs the HTTP listener's address and settings, and warns
// once when /v1 needs a token while /metrics, which names every topic and
// group, stays open (the default, for the scrapes that exist).
func logListening(logger *slog.Logger, cfg Config, addr string) {
	logger.Info("listening", "addr", addr, "data_dir", cfg.DataDir, "flush", cfg.Flush, "auth", cfg.AuthToken != "" || cfg.Credentials != "",
		"credentials", cfg.Credentials, "tls", cfg.TLSCertFile != "", "metrics_auth", cfg.MetricsToken != "" || cfg.Credentials != "", "clock", cfg.Clock)
	if cfg.AuthToken != "" && cfg.MetricsToken == "" && cfg.Credentials == "" {
		logger.Warn("/metrics is open while /v1 needs a token: it names every topic and consumer group to anyone who reaches the port; set -metrics-token to close it")
	}
}

// httpTLS is the TLS of the HTTP API and console: -tls-cert-file's pair,
// reloaded when it changes; nil serves plain HTTP.
func (c Config) httpTLS(sec *security) (*tls.Config, error) {
	if c.TLSCertFile == "" {
		return nil, nil
	}
	return sec.tlsConfig(c.TLSCertFile, c.TLSKeyFile, "", "")
}

// serveHTTP serves the HTTP API on ln in the background, over TLS when tc
// is not nil; Serve's result arrives on the channel.
func serveHTTP(srv *http.Server, ln net.Listener, tc *tls.Config, logger *slog.Logger) chan error {
	serveErr := make(chan error, 1)
	if tc != nil {
		srv.TLSConfig = tc
		go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
		return serveErr
	}
	go func() { serveErr <- srv.Serve(ln) }()
	warnClear(logger, "the HTTP API", ln.Addr())
	return serveErr
}

// startAdapters starts the gRPC and remoting services (each may be nil)
// and logs their addresses, warning when one serves in the clear beyond
// loopback.
func startAdapters(cfg Config, g *grpcService, rm *remotingService, logger *slog.Logger) {
	if g != nil {
		g.start()
		logger.Info(GRPCListeningMsg, "addr", g.ln.Addr().String(), "tls", !cfg.GRPCPlaintext)
		if cfg.GRPCPlaintext {
			warnClear(logger, "the RocketMQ 5 gRPC service", g.ln.Addr())
		}
	}
	if rm != nil {
		rm.start()
		logger.Info(RemotingListeningMsg, "addr", rm.ln.Addr().String(), "tls", cfg.RemotingTLS)
		if !cfg.RemotingTLS {
			warnClear(logger, "the RocketMQ remoting protocol", rm.ln.Addr())
		}
	}
}

// waitStop waits until the broker must stop: ctx ends (nil), or the HTTP
// server, the gRPC service or the storage fails by itself (that error).
// It sets *serveErr to nil when it consumed the HTTP server's result.
func waitStop(ctx context.Context, serveErr *chan error, g *grpcService, rm *remotingService, eng *engine.Engine) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-*serveErr:
		// Serve failed on its own, not through Shutdown.
		*serveErr = nil
		return fmt.Errorf("serve: %w", err)
	case err := <-g.errChan():
		// The gRPC service failed on its own, not through stop.
		return fmt.Errorf("serve gRPC: %w", err)
	case err := <-rm.errChan():
		// The remoting service failed on its own, not through stop.
		return fmt.Errorf("serve remoting: %w", err)
	case <-eng.Failed():
		// Fail-stop (engine/fail.go): after a failed fsync the engine
		// answers every call with unavailable; the process exits non-zero
		// so that its supervisor restarts it, and recovery rebuilds the
		// state from what is durable.
		return fmt.Errorf("storage failed, restart the broker to recover from the commit log: %w", eng.Err())
	}
}
