package access

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Store. The zero value is a broker without
// authentication: every request acts as Anonymous.
type Options struct {
	// File is the credentials file (flag -credentials); empty: none.
	File string
	// KeyFile is the key file that RocketMQ signatures of File's
	// principals are verified with; empty: DefaultKeyFile(File). A
	// missing key file leaves bearer secrets working and signatures of
	// file principals unverifiable.
	KeyFile string
	// AuthToken is the single token of -auth-token: the principal
	// TokenName, with every permission. Empty: none.
	AuthToken string
	// MetricsToken is -metrics-token: the principal MetricsName, with
	// metrics:* only. Empty: none.
	MetricsToken string
	// Poll is how often Watch looks for a changed file; zero means 2s.
	Poll time.Duration
	// Logger receives a record per reload; nil is slog.Default().
	Logger *slog.Logger
}

// Store holds the principals in force. It is safe for concurrent use:
// every check reads one immutable snapshot, and a reload swaps it whole.
type Store struct {
	opts           Options
	token, metrics *Principal
	cur            atomic.Pointer[snapshot]
	reloadMu       sync.Mutex // one reload at a time
}

// snapshot is what one reload read.
type snapshot struct {
	entries map[string]*entry
	key     []byte   // nil: no key file
	sum     [32]byte // of the files' bytes, to see a change
	// loose is the key file's mode when others than its owner may read
	// it (the file is worth every secret); 0 when they may not.
	loose os.FileMode
}

// Open reads the credentials file (if any) and returns the store. A bad
// file is an error here; later, a bad file keeps the rules in force.
func Open(o Options) (*Store, error) {
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.File != "" && o.KeyFile == "" {
		o.KeyFile = DefaultKeyFile(o.File)
	}
	s := &Store{opts: o}
	if o.AuthToken != "" {
		s.token = NewPrincipal(TokenName, everything)
	}
	if o.MetricsToken != "" {
		s.metrics = NewPrincipal(MetricsName, []Rule{{Metrics, "*"}})
	}
	snap, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cur.Store(snap)
	if o.File != "" {
		o.Logger.Info("credentials loaded", "file", o.File, "principals", len(snap.entries), "signing_key", snap.key != nil)
		s.warnLoose(snap)
	}
	return s, nil
}

// read reads the credentials file and the key file.
func (s *Store) read() (*snapshot, error) {
	snap := &snapshot{entries: map[string]*entry{}}
	if s.opts.File == "" {
		return snap, nil
	}
	data, err := os.ReadFile(s.opts.File)
	if err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	f, err := ParseFile(data)
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", s.opts.File, err)
	}
	snap.entries, _ = f.entries()
	keyData, err := os.ReadFile(s.opts.KeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("key file: %w", err)
	default:
		if snap.key, err = ReadKey(s.opts.KeyFile); err != nil {
			return nil, err
		}
		if st, err := os.Stat(s.opts.KeyFile); err == nil && st.Mode().Perm()&0o077 != 0 {
			snap.loose = st.Mode().Perm()
		}
	}
	snap.sum = sha256.Sum256(append(data, keyData...))
	return snap, nil
}

// Reload rereads the files now. On an error the rules in force stay, and
// the error says why; changed reports whether new rules took effect.
func (s *Store) Reload() (changed bool, err error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	snap, err := s.read()
	if err != nil {
		return false, err
	}
	if snap.sum == s.cur.Load().sum {
		return false, nil
	}
	s.cur.Store(snap)
	return true, nil
}

// Watch rereads the files every Options.Poll until ctx ends, and logs
// each reload with its outcome: the principals now in force, or why the
// file was refused and the previous rules kept. A failure is logged once
// until the file changes again.
func (s *Store) Watch(ctx context.Context) {
	if s.opts.File == "" {
		return
	}
	t := time.NewTicker(s.opts.Poll)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := s.Reload()
		switch {
		case err != nil && err.Error() != lastErr:
			lastErr = err.Error()
			s.opts.Logger.Error("credentials reload failed; the previous rules stay in force", "file", s.opts.File, "err", err)
		case err == nil && changed:
			lastErr = ""
			snap := s.cur.Load()
			s.opts.Logger.Info("credentials reloaded", "file", s.opts.File, "principals", len(snap.entries), "signing_key", snap.key != nil)
			s.warnLoose(snap)
		case err == nil:
			lastErr = ""
		}
	}
}

// warnLoose warns when the key file may be read by others than its owner.
func (s *Store) warnLoose(snap *snapshot) {
	if snap.loose != 0 {
		s.opts.Logger.Warn("the key file may be read by others than its owner: whoever reads it can sign as any principal; chmod 600 it",
			"file", s.opts.KeyFile, "mode", snap.loose.String())
	}
}

// Open reports whether the API is open: no credentials file and no
// -auth-token, so every request acts as Anonymous (the default of a
// broker on loopback).
func (s *Store) Open() bool { return s == nil || (s.opts.File == "" && s.opts.AuthToken == "") }

// MetricsOpen reports whether /metrics is open to anyone: it is unless a
// -metrics-token or a credentials file is set (with -auth-token alone it
// stays open, as it always was, so that existing scrapes keep working).
func (s *Store) MetricsOpen() bool {
	return s == nil || (s.opts.File == "" && s.opts.MetricsToken == "")
}

// ErrNoCredentials and ErrBadCredentials are the two ways authentication
// fails. Neither says which principal names exist.
var (
	ErrNoCredentials  = errors.New("credentials are required")
	ErrBadCredentials = errors.New("the credentials do not verify")
)

// Bearer returns the principal of a bearer credential: the -auth-token,
// the -metrics-token, or "name:secret" of a file principal.
func (s *Store) Bearer(cred string) (*Principal, error) { return s.bearer(cred, true) }

// bearer is Bearer; the -metrics-token counts only when metrics is true
// (on /metrics: it opens nothing else, as before principals existed).
func (s *Store) bearer(cred string, metrics bool) (*Principal, error) {
	if cred == "" {
		return nil, ErrNoCredentials
	}
	if s.token != nil && subtle.ConstantTimeCompare([]byte(cred), []byte(s.opts.AuthToken)) == 1 {
		return s.token, nil
	}
	if metrics && s.metrics != nil && subtle.ConstantTimeCompare([]byte(cred), []byte(s.opts.MetricsToken)) == 1 {
		return s.metrics, nil
	}
	name, secret, ok := strings.Cut(cred, ":")
	if !ok {
		return nil, ErrBadCredentials
	}
	return s.Password(name, secret)
}

// Password checks a file principal's name and secret (HTTP Basic, the
// console's sign-in, a bearer "name:secret").
func (s *Store) Password(name, secret string) (*Principal, error) {
	e := s.cur.Load().entries[name]
	if e == nil {
		// Hash anyway, so that an unknown name costs what a known one does.
		hashSecret(make([]byte, saltSize), secret)
		return nil, ErrBadCredentials
	}
	if !bytes.Equal(hashSecret(e.salt, secret), e.hash) {
		return nil, ErrBadCredentials
	}
	return e.principal, nil
}

// Named returns the file principal called name: the principal of a
// client certificate whose subject common name is name, once the TLS
// layer verified the certificate.
func (s *Store) Named(name string) (*Principal, bool) {
	e := s.cur.Load().entries[name]
	if e == nil {
		return nil, false
	}
	return e.principal, true
}

// SigningSecret returns the principal of a RocketMQ access key and the
// secret its signatures are keyed with: the file principal of that name
// (when the key file is present), else the -auth-token, which any other
// access key may sign with, as before principals existed. ok is false
// when nothing can verify the access key's signatures.
func (s *Store) SigningSecret(accessKey string) (p *Principal, secret string, ok bool) {
	snap := s.cur.Load()
	if e := snap.entries[accessKey]; e != nil {
		if snap.key == nil {
			return nil, "", false
		}
		return e.principal, deriveSecret(snap.key, e.principal.Name, e.salt), true
	}
	if s.token != nil {
		return s.token, s.opts.AuthToken, true
	}
	return nil, "", false
}
