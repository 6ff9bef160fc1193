package access

import (
	"net/http"
	"strings"
)

// FromRequest returns the principal an HTTP request acts as:
//
//   - Anonymous when the store is Open;
//   - the Authorization header's: "Bearer <token>" (the -auth-token, the
//     -metrics-token or "name:secret") or "Basic" with name and secret;
//   - without that header, the subject common name of a client
//     certificate the TLS layer verified (mTLS), when a file principal
//     has that name.
//
// The errors are ErrNoCredentials and ErrBadCredentials.
func (s *Store) FromRequest(r *http.Request) (*Principal, error) {
	if s.Open() {
		return Anonymous, nil
	}
	return s.authenticate(r, false)
}

// FromMetricsRequest is FromRequest for /metrics, which is open while
// MetricsOpen says so.
func (s *Store) FromMetricsRequest(r *http.Request) (*Principal, error) {
	if s.MetricsOpen() {
		return Anonymous, nil
	}
	return s.authenticate(r, true)
}

// authenticate finds the request's principal; the -metrics-token counts
// only when metrics is true.
func (s *Store) authenticate(r *http.Request, metrics bool) (*Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		cred = strings.TrimSpace(cred)
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			return s.bearer(cred, metrics)
		case strings.EqualFold(scheme, "Basic"):
			name, secret, ok := r.BasicAuth()
			if !ok {
				return nil, ErrBadCredentials
			}
			return s.Password(name, secret)
		}
		return nil, ErrBadCredentials
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		if p, ok := s.Named(r.TLS.VerifiedChains[0][0].Subject.CommonName); ok {
			return p, nil
		}
		return nil, ErrBadCredentials
	}
	return nil, ErrNoCredentials
}
