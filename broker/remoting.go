package broker

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/remoting"
)

// RemotingListeningMsg is the message of the log record that Run writes
// once the remoting service accepts connections; its "addr" attribute is
// the bound address.
const RemotingListeningMsg = "serving the RocketMQ remoting protocol"

// validateRemoting checks -remoting-listen (empty, or host:port).
func (c Config) validateRemoting(bad func(format string, args ...any)) {
	if c.RemotingListen == "" {
		return
	}
	if _, port, err := net.SplitHostPort(c.RemotingListen); err != nil {
		bad("-remoting-listen %q is not host:port: %v", c.RemotingListen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("-remoting-listen %q: port %q is not a number in [0, 65535]", c.RemotingListen, port)
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
	if c.RemotingListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", c.RemotingListen)
	if err != nil && c.RemotingListen == DefaultConfig().RemotingListen {
		logger.Warn("the RocketMQ remoting protocol is not served: its default address is taken; set -remoting-listen to another address, or to \"\" to silence this", "addr", c.RemotingListen, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s (-remoting-listen): %w", c.RemotingListen, err)
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
	a, err := remoting.New(eng, remoting.Options{Limits: o.Limits, DefaultQueues: o.DefaultQueues,
		AutoCreateTopics: !o.NoAutoCreate, Access: sec.store, Audit: sec.audit, OffsetsDir: filepath.Join(c.DataDir, "remoting"),
		MaxFrame: int(c.MaxRequestBytes), Logger: logger})
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &remotingService{adapter: a, ln: ln, errc: make(chan error, 1)}, nil
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
// makes the consumer offsets durable.
func (r *remotingService) stop(logger *slog.Logger) {
	if err := r.adapter.Close(); err != nil {
		logger.Error("remoting: consumer offsets could not be made durable at shutdown", "err", err)
	}
}

// errChan is the channel of Serve's failure; nil without a service.
func (r *remotingService) errChan() <-chan error {
	if r == nil {
		return nil
	}
	return r.errc
}
