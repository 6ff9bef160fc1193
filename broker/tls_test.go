package broker

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/access/accesstest"
	"github.com/hourglass-mq/hourglass/api"
)

// logSink is a log the broker writes while the test reads it.
type logSink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tlsBroker runs a broker whose HTTP API serves the CA-issued
// certificate with common name cn; it returns its https base URL.
func tlsBroker(t *testing.T, edit func(*Config, *accesstest.CA)) (string, *accesstest.CA, string, *logSink) {
	t.Helper()
	dir := t.TempDir()
	ca := accesstest.NewCA(t, dir)
	cert, key, _ := ca.Issue(t, dir, "server", "first", true)
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.GRPCListen, cfg.RemotingListen = t.TempDir(), "127.0.0.1:0", "", ""
	cfg.TLSCertFile, cfg.TLSKeyFile = cert, key
	cfg.DrainTimeout = time.Second
	if edit != nil {
		edit(&cfg, ca)
	}
	logs := &logSink{}
	ctx, cancel := context.WithCancel(context.Background())
	base, runErr := startRun(ctx, t, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return strings.Replace(base, "http://", "https://", 1), ca, dir, logs
}

// TestTLSCertificateRotationUnderLoad: while clients make requests, each on
// a new connection (a new handshake), the certificate files are replaced
// by an operator's two renames (key first, so for a moment the pair does
// not match); the broker serves the new certificate without a restart,
// and no request fails, before, during or after.
func TestTLSCertificateRotationUnderLoad(t *testing.T) {
	base, ca, dir, logs := tlsBroker(t, nil)
	var ok, failed atomic.Int64
	var newSeen atomic.Bool
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, DisableKeepAlives: true}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get(base + "/healthz")
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
					continue
				}
				ok.Add(1)
				if resp.TLS.PeerCertificates[0].Subject.CommonName == "second" {
					newSeen.Store(true)
				}
			}
		}()
	}
	waitUntil(t, "requests under the first certificate", func() bool { return ok.Load() > 50 })
	before := ok.Load()
	ca.Issue(t, dir, "server", "second", true) // key, then certificate, each by a rename
	waitUntil(t, "the second certificate to be served", newSeen.Load)
	after := ok.Load()
	waitUntil(t, "requests under the second certificate", func() bool { return ok.Load() > after+50 })
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed during the rotation; first: %v", n, n+ok.Load(), firstErr.Load())
	}
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Fatalf("the reload is not logged: %s", logs.String())
	}
	t.Logf("%d requests before the rotation, %d in all, none failed", before, ok.Load())
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTLSClientCertificateIsAPrincipal: with -tls-client-ca, a client
// certificate the CA issued with common name "ops" is the file principal
// ops; without it (and without a header) the request is 401, and plain
// HTTP on the TLS port gets no answer of the API.
func TestTLSClientCertificateIsAPrincipal(t *testing.T) {
	creds, _ := accesstest.Write(t, t.TempDir(), map[string][]string{"ops": {"admin:*"}})
	base, ca, dir, _ := tlsBroker(t, func(c *Config, ca *accesstest.CA) { c.Credentials, c.TLSClientCA = creds, ca.File })
	_, _, clientCert := ca.Issue(t, dir, "ops-client", "ops", false)
	whoami := func(certs ...tls.Certificate) (int, api.Whoami) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: certs}}}
		resp, err := c.Get(base + "/v1/whoami")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var w api.Whoami
		json.NewDecoder(resp.Body).Decode(&w)
		return resp.StatusCode, w
	}
	if status, _ := whoami(); status != 401 {
		t.Fatalf("no certificate, no header: %d, want 401", status)
	}
	if status, w := whoami(clientCert); status != 200 || w.Principal != "ops" {
		t.Fatalf("with the certificate of ops: %d %+v", status, w)
	}
	other := accesstest.NewCA(t, t.TempDir())
	_, _, foreign := other.Issue(t, t.TempDir(), "foreign", "ops", false)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{foreign}}}}
	if resp, err := c.Get(base + "/v1/whoami"); err == nil {
		resp.Body.Close()
		t.Fatalf("a certificate of another CA named ops: %d, want the handshake refused", resp.StatusCode)
	}
	resp, err := http.Get(strings.Replace(base, "https://", "http://", 1) + "/v1/whoami")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP on the TLS port: %d", resp.StatusCode)
		}
	}
}

// TestWarnsWhenServingInTheClearBeyondLoopback: plain HTTP on loopback is
// the quiet default; on an address other hosts reach, serve warns.
func TestWarnsWhenServingInTheClearBeyondLoopback(t *testing.T) {
	for _, c := range []struct {
		listen string
		warns  bool
	}{{"127.0.0.1:0", false}, {"0.0.0.0:0", true}} {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.Listen, cfg.GRPCListen, cfg.RemotingListen = t.TempDir(), c.listen, "", ""
		logs := &logSink{}
		ctx, cancel := context.WithCancel(context.Background())
		_, runErr := startRun(ctx, t, cfg, slog.New(slog.NewTextHandler(logs, nil)))
		cancel()
		if err := <-runErr; err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "the HTTP API listens in the clear"); got != c.warns {
			t.Errorf("-listen %s: warned %v, want %v: %s", c.listen, got, c.warns, logs.String())
		}
	}
}
