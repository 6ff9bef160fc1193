// Package tlsreload serves a certificate and key from files and picks up
// a new pair when the files change, without a restart: every listener of
// the broker (HTTP and the console, RocketMQ gRPC, remoting) takes its
// tls.Config from here.
//
// A handshake looks at the files' size and modification time at most
// once per CheckEvery; when they changed it loads the pair again. A pair
// that does not load (a key written before its certificate, a half
// written file) keeps the previous one in service, is logged once, and is
// tried again at the next check: a rotation never fails a handshake.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CheckEvery is how often, at most, a handshake looks at the files.
const CheckEvery = time.Second

// Reloader holds the certificate of a pair of PEM files.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string    // size and mtime of both files when cert was loaded
	checked time.Time // the last look at the files
	lastErr string    // the last failed load, logged once
}

// New loads the pair and returns its reloader; a pair that does not load
// is an error here.
func New(certFile, keyFile string, logger *slog.Logger) (*Reloader, error) {
	if logger == nil {
		logger = slog.Default()
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: logger}
	stamp, err := r.stampNow()
	if err != nil {
		return nil, err
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	r.cert, r.stamp, r.checked = &c, stamp, time.Now()
	return r, nil
}

func (r *Reloader) stampNow() (string, error) {
	var s string
	for _, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("TLS: %w", err)
		}
		s += fmt.Sprintf("%d.%d;", st.Size(), st.ModTime().UnixNano())
	}
	return s, nil
}

// GetCertificate is tls.Config.GetCertificate: the pair in service,
// reloaded first when its files changed.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= CheckEvery {
		r.checked = time.Now()
		r.reloadLocked()
	}
	return r.cert, nil
}

// Reload looks at the files now (tests, and a SIGHUP if one is wired).
func (r *Reloader) Reload() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reloadLocked()
}

func (r *Reloader) reloadLocked() {
	stamp, err := r.stampNow()
	if err == nil && stamp == r.stamp {
		return
	}
	var c tls.Certificate
	if err == nil {
		c, err = tls.LoadX509KeyPair(r.certFile, r.keyFile)
	}
	if err != nil {
		if err.Error() != r.lastErr {
			r.lastErr = err.Error()
			r.log.Error("TLS certificate reload failed; the previous certificate stays in service", "cert", r.certFile, "key", r.keyFile, "err", err)
		}
		return
	}
	r.cert, r.stamp, r.lastErr = &c, stamp, ""
	subject := ""
	if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
		subject = leaf.Subject.String() + ", expires " + leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	r.log.Info("TLS certificate reloaded", "cert", r.certFile, "certificate", subject)
}

// ServerConfig is the TLS configuration of a listener serving r's
// certificate. With clientCA (a PEM file of CA certificates) it asks for
// a client certificate and verifies one when given (mTLS): the broker then
// takes the certificate's subject common name as the principal of a
// request that carries no other credentials. Without it, no client
// certificate is asked for.
func ServerConfig(r *Reloader, clientCA string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA %s holds no PEM certificate", clientCA)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, nil
}
