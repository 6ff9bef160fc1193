package broker

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/remoting"
)

// RemotingListeningMsg is the message of the log record that Run writes
// once the remoting service accepts connections; its "addr" attribute is
// the bound address.
const RemotingListeningMsg = "serving the RocketMQ remoting protocol"

// validateRemoting checks -remoting-listen (empty, or host:port) and
// -remoting-max-conns.
func (c Config) validateRemoting(bad func(format string, args ...any)) {
	validateListen("remoting-listen", c.RemotingListen, bad)
	if c.RemotingMaxConns < 0 {
		bad("-remoting-max-conns %d must not be negative (0 means no bound)", c.RemotingMaxConns)
	}
}

// remotingService is the remoting protocol of a running server.
type remotingService struct {
	adapter *remoting.Server
	ln      net.Listener
	errc    chan error // the result of Serve
}

// newRemoting opens the listener of c.RemotingListen and the adapter over
// eng; it returns nil, nil when the service is disabled, or when the
// default address is taken (with a warning), as the gRPC service does.
func newRemoting(c Config, eng *engine.Engine, logger *slog.Logger, sec *security) (*remotingService, error) {
	ln, err := listenOptional("remoting-listen", c.RemotingListen, DefaultConfig().RemotingListen, "the RocketMQ remoting protocol", logger)
	if ln == nil || err != nil {
		return nil, err
	}
	if c.RemotingTLS {
		tc, err := c.remotingTLS(sec)
		if err != nil {
			ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, tc)
	}
	o := c.EngineOptions(logger)
	a, err := remoting.New(eng, remoting.Options{Limits: o.Limits, DefaultQueues: o.DefaultQueues, MaxBatch: o.MaxBatch,
		AutoCreateTopics: !o.NoAutoCreate, Access: sec.store, Audit: sec.audit, OffsetsDir: filepath.Join(c.DataDir, "remoting"),
		MaxFrame: int(c.MaxRequestBytes), MaxConns: remotingMaxConns(c.RemotingMaxConns), Logger: logger})
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &remotingService{adapter: a, ln: ln, errc: make(chan error, 1)}, nil
}

// remotingMaxConns maps -remoting-max-conns onto Options.MaxConns, where
// 0 is the default and a negative count no bound.
func remotingMaxConns(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// remotingTLS is the TLS of the remoting port: the gRPC port's
// certificate, else the self-signed one kept in <data-dir>/remoting-tls.
func (c Config) remotingTLS(sec *security) (*tls.Config, error) {
	cert, key := c.rocketMQCert()
	host, _, _ := net.SplitHostPort(c.RemotingListen)
	return sec.tlsConfig(cert, key, filepath.Join(c.DataDir, "remoting-tls"), host)
}

// start serves in the background; its failure arrives on r.errc.
func (r *remotingService) start() {
	go func() { r.errc <- r.adapter.Serve(r.ln) }()
}

// stop closes the listener and every connection, ending long polls, and
// makes the consumer offsets durable. An error means offsets the clients
// committed (or pulls carried) may be lost: the groups move back and get
// those messages again. Run returns it, so that the process exits
// non-zero rather than report a clean stop.
func (r *remotingService) stop(logger *slog.Logger) error {
	if err := r.adapter.Close(); err != nil {
		logger.Error("remoting: consumer offsets could not be made durable at shutdown", "err", err)
		return fmt.Errorf("remoting: consumer offsets could not be made durable at shutdown: %w", err)
	}
	return nil
}

// errChan is the channel of Serve's failure; nil without a service.
func (r *remotingService) errChan() <-chan error {
	if r == nil {
		return nil
	}
	return r.errc
}
