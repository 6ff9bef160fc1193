// Package client is the Go client of the hourglass HTTP API v1: send
// delayed messages, inspect, cancel and reschedule them, manage topics and
// consumer groups, receive with leases and acknowledge.
//
// Every method takes a context, which bounds the whole call including
// retries; the client sets no timeout of its own because a long-poll
// Receive legitimately waits up to its Wait. Errors the broker returns are
// *Error values carrying the HTTP status and the stable code of package
// errs; test them with IsNotFound and friends, or with
// errors.Is(err, errs.ErrNotFound).
//
// # Retries
//
// A failed call is retried, with exponential backoff and jitter, only when
// the failure is transient and a second attempt cannot do harm:
//
//   - reads (GET: Inspect, InspectKey, Topics, DescribeTopic, Groups,
//     Stats, Health) are retried on any connection error and on 429, 502,
//     503 and 504;
//   - every other call (Send, SendBatch, Cancel, Reschedule, CreateTopic,
//     CreateGroup, Receive, Ack, Nack, ChangeInvisibility, Redrive) is
//     retried only when the broker certainly did not act on it: the
//     connection could not be opened (nothing was written), or the broker
//     answered 429 resource_exhausted (it refused the request).
//
// A send whose response was lost (connection reset, timeout, 502/504 from a
// proxy) is retried only when it is idempotent: when every message carries
// a DedupID, which WithIdempotentSends draws for the caller. The broker
// then stores it at most once within the topic's dedup window, and the
// retry's receipt (Duplicate set if the first attempt landed) names the one
// stored message. Without a DedupID it is NOT retried: the broker may have
// stored it, and a second send would create a duplicate with a new ID; the
// caller sees the error and decides (a message sent with a Key can be
// looked up with InspectKey). The same holds for Receive
// (a lost response leaves the leased messages invisible until their lease
// expires, after which they are delivered again) and for Ack.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of the options.
const (
	// DefaultRetries is how many times a retryable failure is retried.
	DefaultRetries = 2
	// DefaultBackoffBase is the wait before the first retry; each retry
	// doubles it, up to DefaultBackoffMax.
	DefaultBackoffBase = 100 * time.Millisecond
	// DefaultBackoffMax caps the wait between two attempts.
	DefaultBackoffMax = 2 * time.Second
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// DefaultIdleConns is how many idle connections to the server the default
// transport keeps for reuse: enough for as many concurrent callers (a
// consumer or producer pool), so that each request does not pay a TCP
// connect and close.
const DefaultIdleConns = 64

// writeBufferSize is the default transport's write buffer per connection
// (64 KiB each, about 4 MiB at DefaultIdleConns): a batch's body under
// that fits beside its headers and goes out in one write. With
// the 4 KiB default, net/http handed the rest of a larger body to the
// connection's ReadFrom, which copied it through a 32 KiB buffer made
// for each request.
const writeBufferSize = 64 << 10

// defaultTransport is shared by the clients built without
// WithHTTPClient, as http.DefaultTransport would be.
var defaultTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = DefaultIdleConns
	t.MaxIdleConns = max(t.MaxIdleConns, DefaultIdleConns)
	t.WriteBufferSize = writeBufferSize
	return t
}()

// Client talks to one hourglass server. It is safe for concurrent use.
type Client struct {
	base        string // scheme://host[:port][/prefix], no trailing slash
	token       string
	hc          *http.Client
	retries     int
	backoffBase time.Duration
	backoffMax  time.Duration
	autoDedup   bool
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the bearer token sent on every request (the server's
// -auth-token). Empty means none.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sets the HTTP client used for requests. Its Timeout, if
// any, must exceed the longest Receive wait, or long polls fail; prefer
// contexts for deadlines. A Stream ignores it (a stream lasts as long as
// its consumer keeps it, and a timeout would cut it with its batches
// still leased); end a stream with its context or Close. Default: a client with no timeout over a copy
// of http.DefaultTransport that keeps DefaultIdleConns idle connections
// to the server (http.DefaultTransport keeps 2, so that more than 2
// concurrent callers open and close a connection for most requests).
// nil keeps the default.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithIdempotentSends gives every message sent without a DedupID a random
// one (128 bits, hex), so that Send and SendBatch retry ambiguous failures
// (a lost response) without risking a duplicate, within the topic's dedup
// window. The IDs are drawn once per call, before its first attempt.
func WithIdempotentSends() Option { return func(c *Client) { c.autoDedup = true } }

// WithRetries sets how many times a retryable failure is retried (see the
// package doc for which are). 0 disables retries; negative is taken as 0.
func WithRetries(n int) Option {
	return func(c *Client) { c.retries = max(n, 0) }
}

// WithBackoff sets the wait before the first retry (doubled for each
// further retry, with jitter) and its cap. Non-positive values keep the
// defaults.
func WithBackoff(base, maxWait time.Duration) Option {
	return func(c *Client) {
		if base > 0 {
			c.backoffBase = base
		}
		if maxWait > 0 {
			c.backoffMax = maxWait
		}
	}
}

// New returns a client of the server at baseURL, e.g.
// "http://127.0.0.1:7070". A base URL without a scheme gets "http://".
// New does not contact the server; use Health for that.
func New(baseURL string, opts ...Option) *Client {
	base := strings.TrimRight(strings.TrimSpace(baseURL), "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	c := &Client{
		base:        base,
		hc:          &http.Client{Transport: defaultTransport},
		retries:     DefaultRetries,
		backoffBase: DefaultBackoffBase,
		backoffMax:  DefaultBackoffMax,
	}
	for _, o := range opts {
		o(c)
	}
	if c.backoffMax < c.backoffBase {
		c.backoffMax = c.backoffBase
	}
	return c
}

// BaseURL returns the server URL requests go to.
func (c *Client) BaseURL() string { return c.base }

// path joins escaped path segments: each element is escaped on its own, so
// a key "a/b" stays one segment.
func path(elems ...string) string {
	var b strings.Builder
	for _, e := range elems {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(e))
	}
	return b.String()
}

// do performs one API call: method and path (already escaped, starting
// with /), an optional request value encoded as JSON, and an optional
// value the 2xx response is decoded into. It retries as the package doc
// says.
func (c *Client) do(ctx context.Context, method, p string, in, out any) error {
	return c.doRetry(ctx, method, p, in, out, method == http.MethodGet)
}

// doRetry is do, where safe says whether the request may be repeated after
// an ambiguous failure: a read, or a send whose every message has a dedup ID.
func (c *Client) doRetry(ctx context.Context, method, p string, in, out any, safe bool) error {
	var payload []byte
	if a, ok := in.(jsonAppender); ok {
		payload = a.appendJSON(nil)
	} else if in != nil {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return fmt.Errorf("hourglass client: encode request: %w", err)
		}
	}
	readOnly := safe
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, method, p, payload, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || attempt >= c.retries || !retryable(err, readOnly) {
			return err
		}
		t := time.NewTimer(c.wait(attempt, err))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (while waiting to retry after: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// once performs one attempt.
func (c *Client) once(ctx context.Context, method, p string, payload []byte, out any) error {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+p, body)
	if err != nil {
		return fmt.Errorf("hourglass client: %w", err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &transportError{err}
	}
	defer func() {
		// Drain a little so the connection can be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readError(resp)
	}
	if out == nil {
		return nil
	}
	if rd, ok := out.(rawDecoder); ok {
		err = readBody(resp, rd)
	} else {
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	if err != nil {
		return fmt.Errorf("hourglass client: %s %s: decode response: %w", method, p, err)
	}
	return nil
}

// retryable reports whether err may be retried; readOnly tells whether
// the request changes nothing on the server.
func retryable(err error, readOnly bool) bool {
	var e *Error
	if errors.As(err, &e) {
		switch e.StatusCode {
		case http.StatusTooManyRequests:
			// The broker refused the request before acting on it.
			return true
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return readOnly
		}
		return false
	}
	var te *transportError
	if !errors.As(err, &te) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if isDialError(err) {
		// Nothing was written: the request never reached the server.
		return true
	}
	// Reset, EOF, timeout: the request may have been written and acted
	// on; only a read can be repeated without consequence.
	return readOnly
}

// transportError is a failure to get a response at all (as opposed to an
// error response or an undecodable one).
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// isDialError reports whether err happened while opening the connection.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// wait returns how long to wait before retry number attempt+1: the
// server's Retry-After when it gave one, else exponential backoff with
// jitter in [d/2, d].
func (c *Client) wait(attempt int, err error) time.Duration {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter
	}
	d := c.backoffBase
	for i := 0; i < attempt && d < c.backoffMax; i++ {
		d *= 2
	}
	d = min(d, c.backoffMax)
	half := d / 2
	return half + rand.N(half+1)
}

// parseRetryAfter reads a Retry-After header given in seconds (the HTTP
// date form is not used by hourglass and is ignored).
func parseRetryAfter(h string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
