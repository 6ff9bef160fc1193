package cli

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/internal/tlsreload"
	"github.com/hourglass-mq/hourglass/kafkamode"
	"github.com/hourglass-mq/hourglass/kafkamode/kafkahttp"
	"github.com/hourglass-mq/hourglass/metrics"
)

// kafkaAPIHelp is the part of `hourglass kafka --help` about --listen.
const kafkaAPIHelp = `

With --listen the worker also serves the HTTP API there, so that the client
commands work against it with --server http://ADDR: send (a record with
_deliverAt and _bizTopic = --topic, partitioned by --key), inspect (by the
ID k:<partition>:<offset> that send prints, or --topic and --key for the
latest pending one), cancel and reschedule (control records in the
message's partition; a reschedule answers a new ID; cancel --every-key K
cancels every pending message with key K), and forecast (this worker's
partitions only). See the README, "Beyond one machine: Kafka mode".`

// apiSecurity is who may call the Kafka-mode HTTP API and over what.
type apiSecurity struct {
	token, credentials, auditLog string
	certFile, keyFile, clientCA  string
}

// apiSecurityFlags binds the flags of apiSecurity to fs.
func apiSecurityFlags(fs *flag.FlagSet) *apiSecurity {
	var sec apiSecurity
	fs.StringVar(&sec.credentials, "credentials", "", "credentials file of the HTTP API's principals and their rules (hourglass principal add); reread when it changes")
	fs.StringVar(&sec.auditLog, "audit-log", "", "audit trail of message management and refusals: empty: the log (logger=audit); -: JSON on stderr; else a file")
	fs.StringVar(&sec.certFile, "tls-cert-file", "", "PEM certificate of the HTTP API, reloaded when it changes; empty: plain HTTP")
	fs.StringVar(&sec.keyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&sec.clientCA, "tls-client-ca", "", "PEM CAs whose client certificates the HTTP API verifies (mTLS)")
	return &sec
}

// open returns the store of the credentials and the audit trail.
func (s apiSecurity) open(log *slog.Logger) (*access.Store, *access.Audit, io.Closer, error) {
	if (s.certFile == "") != (s.keyFile == "") {
		return nil, nil, nil, fmt.Errorf("--tls-cert-file and --tls-key-file go together")
	}
	st, err := access.Open(access.Options{File: s.credentials, AuthToken: s.token, Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	auditLog, closer := log.With("logger", access.AuditLogName), io.Closer(io.NopCloser(nil))
	if s.auditLog != "" {
		if auditLog, closer, err = access.OpenAuditLog(s.auditLog); err != nil {
			return nil, nil, nil, err
		}
	}
	return st, access.NewAudit(auditLog), closer, nil
}

// serveKafkaAPI serves the Kafka-mode HTTP API of w on addr until the
// returned stop is called; the credentials file is reread until ctx ends.
func serveKafkaAPI(ctx context.Context, a *App, w *kafkamode.Worker, addr string, sec apiSecurity, log *slog.Logger) (stop func(), err error) {
	st, audit, auditClose, err := sec.open(log)
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if sec.certFile != "" {
		r, err := tlsreload.New(sec.certFile, sec.keyFile, log)
		if err == nil {
			tc, err = tlsreload.ServerConfig(r, sec.clientCA)
		}
		if err != nil {
			auditClose.Close()
			return nil, err
		}
	}
	h, err := kafkahttp.New(w.Config(), w, kafkahttp.Options{Access: st, Audit: audit, Metrics: metrics.KafkaHandler(w), Logger: log})
	if err != nil {
		auditClose.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		h.Close()
		auditClose.Close()
		return nil, fmt.Errorf("--listen: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); st.Watch(watchCtx) }()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, TLSConfig: tc}
	scheme := "http"
	if tc != nil {
		scheme = "https"
		go func() { _ = srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { _ = srv.Serve(ln) }()
	}
	fmt.Fprintf(a.Stdout, "HTTP API on %s://%s\n", scheme, ln.Addr())
	return func() { srv.Close(); h.Close(); stopWatch(); <-watched; auditClose.Close() }, nil
}

// cancelEveryKey is `hourglass cancel --every-key K` against a Kafka-mode
// worker.
func (a *App) cancelEveryKey(ctx context.Context, c *command, cf *clientFlags, cl *client.Client, key string, t target, pos []string) int {
	if t.key != "" || t.topic != "" || len(pos) > 0 {
		return a.usageError(c, "--every-key goes alone: no message ID, --topic or --key")
	}
	r, err := cl.CancelKey(ctx, key)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(r)
		return ExitOK
	}
	if r.State == client.KafkaCancelled {
		fmt.Fprintf(a.Stdout, "cancelled every pending message with key %s, %d when the cancel was written (cancel record %s)\n", r.Key, r.Matched, r.Control)
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "cancel of every pending message with key %s requested (cancel record %s); the worker has not applied it yet\n", r.Key, r.Control)
	return ExitOK
}
