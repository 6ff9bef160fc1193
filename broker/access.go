package broker

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/internal/tlsreload"
	"github.com/hourglass-mq/hourglass/rocketmq"
)

// security is what every listener shares: who may do what (the store of
// -credentials and the tokens), the audit trail, and the TLS
// certificates, each pair of files loaded once and reloaded when it
// changes.
type security struct {
	store      *access.Store
	audit      *access.Audit
	auditClose io.Closer
	clientCA   string
	logger     *slog.Logger
	// reloaders holds one reloader per pair of files, so that listeners
	// sharing a certificate share its reloads.
	reloaders map[[2]string]*tlsreload.Reloader
}

// openSecurity opens the credentials and the audit trail of cfg.
func openSecurity(cfg Config, logger *slog.Logger) (*security, error) {
	st, err := access.Open(access.Options{File: cfg.Credentials, KeyFile: cfg.CredentialsKeyFile,
		AuthToken: cfg.AuthToken, MetricsToken: cfg.MetricsToken, Logger: logger})
	if err != nil {
		return nil, err
	}
	s := &security{store: st, clientCA: cfg.TLSClientCA, logger: logger, reloaders: map[[2]string]*tlsreload.Reloader{},
		auditClose: io.NopCloser(nil)}
	auditLog := logger.With("logger", access.AuditLogName)
	if cfg.AuditLog != "" {
		if auditLog, s.auditClose, err = access.OpenAuditLog(cfg.AuditLog); err != nil {
			return nil, err
		}
	}
	s.audit = access.NewAudit(auditLog)
	return s, nil
}

// watch rereads the credentials file until ctx ends.
func (s *security) watch(ctx context.Context) { s.store.Watch(ctx) }

// close closes the audit trail's file.
func (s *security) close() { s.auditClose.Close() }

// tlsConfig is the TLS of a listener: the pair certFile, keyFile, or, when
// both are empty, the self-signed pair kept in selfDir (made on first
// use) for host. The client CA applies to every listener.
func (s *security) tlsConfig(certFile, keyFile, selfDir, host string) (*tls.Config, error) {
	if certFile == "" {
		if _, err := rocketmq.SelfSignedTLS(selfDir, host); err != nil {
			return nil, err
		}
		certFile, keyFile = filepath.Join(selfDir, "cert.pem"), filepath.Join(selfDir, "key.pem")
	}
	k := [2]string{certFile, keyFile}
	r := s.reloaders[k]
	if r == nil {
		var err error
		if r, err = tlsreload.New(certFile, keyFile, s.logger); err != nil {
			return nil, err
		}
		s.reloaders[k] = r
	}
	return tlsreload.ServerConfig(r, s.clientCA)
}

// warnClear warns when a listener serves without TLS on an address other
// hosts can reach: whatever credentials its clients send cross the
// network readable.
func warnClear(logger *slog.Logger, what string, addr net.Addr) {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return
	}
	logger.Warn(what+" listens in the clear on an address other hosts can reach: credentials and messages cross the network readable; serve TLS (docs/operations.md, \"TLS and principals\")", "addr", addr.String())
}
