package broker

import (
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/rocketmq"
)

// validateGRPC checks -grpc-listen (empty, or host:port),
// -grpc-long-poll and -grpc-signature-skew.
func (c Config) validateGRPC(bad func(format string, args ...any)) {
	if c.GRPCLongPoll < 100*time.Millisecond || c.GRPCLongPoll > engine.MaxReceiveWait {
		bad("-grpc-long-poll %v is not in [100ms, %v]", c.GRPCLongPoll, engine.MaxReceiveWait)
	}
	if c.GRPCSignatureSkew < time.Second || c.GRPCSignatureSkew > rocketmq.MaxSignatureSkew {
		bad("-grpc-signature-skew %v is not in [1s, %v]", c.GRPCSignatureSkew, rocketmq.MaxSignatureSkew)
	}
	if (c.GRPCCertFile == "") != (c.GRPCKeyFile == "") {
		bad("-grpc-cert-file and -grpc-key-file go together")
	}
	validateListen("grpc-listen", c.GRPCListen, bad)
}

// grpcService is the RocketMQ 5 gRPC service of a running server.
type grpcService struct {
	adapter *rocketmq.Server
	srv     *grpc.Server
	ln      net.Listener
	errc    chan error // the result of Serve
}

// newGRPC opens the listener of c.GRPCListen and the adapter over eng; it
// returns nil, nil when the service is disabled, or when the default
// address is taken (with a warning).
func newGRPC(c Config, eng *engine.Engine, logger *slog.Logger, sec *security) (*grpcService, error) {
	ln, err := listenOptional("grpc-listen", c.GRPCListen, DefaultConfig().GRPCListen, "the RocketMQ 5 gRPC service", logger)
	if ln == nil || err != nil {
		return nil, err
	}
	var extra []grpc.ServerOption
	if !c.GRPCPlaintext {
		tc, err := c.grpcTLS(sec)
		if err != nil {
			ln.Close()
			return nil, err
		}
		extra = append(extra, grpc.Creds(credentials.NewTLS(tc)))
	}
	o := c.EngineOptions(logger)
	a := rocketmq.New(eng, rocketmq.Options{Limits: o.Limits, DefaultQueues: o.DefaultQueues, MaxBatch: o.MaxBatch, AutoCreateTopics: !o.NoAutoCreate,
		MaxLongPoll: c.GRPCLongPoll, Access: sec.store, Audit: sec.audit, SignatureSkew: c.GRPCSignatureSkew,
		MaxRequestBytes: int(c.MaxRequestBytes), EarlyAcks: c.GRPCEarlyAcks, Logger: logger})
	return &grpcService{adapter: a, srv: a.GRPCServer(extra...), ln: ln, errc: make(chan error, 1)}, nil
}

// grpcTLS is the TLS of the gRPC port: the certificate of
// -grpc-cert-file, else of -tls-cert-file, else the self-signed one of the
// data directory; reloaded when its files change.
func (c Config) grpcTLS(sec *security) (*tls.Config, error) {
	cert, key := c.rocketMQCert()
	host, _, _ := net.SplitHostPort(c.GRPCListen)
	return sec.tlsConfig(cert, key, filepath.Join(c.DataDir, "grpc-tls"), host)
}

// rocketMQCert is the certificate pair of the RocketMQ listeners:
// -grpc-cert-file's, else -tls-cert-file's; empty for self-signed.
func (c Config) rocketMQCert() (string, string) {
	if c.GRPCCertFile != "" {
		return c.GRPCCertFile, c.GRPCKeyFile
	}
	return c.TLSCertFile, c.TLSKeyFile
}

// start serves in the background; its failure arrives on g.errc.
func (g *grpcService) start() {
	go func() { g.errc <- g.srv.Serve(g.ln) }()
}

// stop ends the telemetry streams and long polls, lets the other calls
// finish for at most drain, then closes every connection.
func (g *grpcService) stop(drain time.Duration, logger *slog.Logger) {
	g.adapter.Close()
	done := make(chan struct{})
	go func() { g.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(drain):
		logger.Warn("gRPC drain timeout reached; closing the remaining connections")
		g.srv.Stop()
		<-done
	}
}

// errChan is the channel of Serve's failure; nil (never ready) without a
// service.
func (g *grpcService) errChan() <-chan error {
	if g == nil {
		return nil
	}
	return g.errc
}

// GRPCListeningMsg is the message of the log record that Run writes once
// the gRPC service accepts calls; its "addr" attribute is the bound
// address (the way to learn it when -grpc-listen has port 0).
const GRPCListeningMsg = "serving the RocketMQ 5 gRPC protocol"
