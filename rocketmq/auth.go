package rocketmq

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	gstatus "google.golang.org/grpc/status"

	"github.com/hourglass-mq/hourglass/access"
)

// The RocketMQ 5 clients sign each call with their access secret:
//
//	x-mq-date-time: 20060102T150405Z                       (UTC, the signed text)
//	authorization:  MQv2-HMAC-SHA1 Credential=<access key>/<region>/Rocketmq,
//	                SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(secret, date-time)>
//
// With credentials configured (Options.Access), a call is accepted only if
// its signature verifies with the secret of its access key and its
// date-time is within Options.SignatureSkew of the broker's wall clock.
// The access key is the principal (package access); what the call may do
// is checked against that principal's rules (permissions.go).
//
// The signature covers the date-time alone, to the second: not the call,
// the connection, the client ID or a nonce (the official Java and Go
// clients sign exactly this, per call). Every call a client makes in one
// second carries the same signature, and so do the calls of all its
// clients with the same secret, on their own connections. A signature
// therefore cannot be made single-use or bound to a connection without
// refusing those clients' own calls. What bounds a replay is time: a
// captured signature is accepted, for any call on any connection, until
// its date-time is SignatureSkew behind the broker's clock, and never
// after. The skew is the only lever, so it is narrow by default
// (DefaultSignatureSkew) and must only cover the clients' clock offsets.
// docs/operations.md says what a replay can and cannot do.

// DefaultSignatureSkew is the default of Options.SignatureSkew: how far a
// signed call's date-time may be from the broker's clock, which is also
// how long a captured signature can be replayed. RocketMQ's clients sign
// with the time of the call, so it only has to cover their clocks'
// offsets from the broker's (milliseconds under NTP).
const DefaultSignatureSkew = 30 * time.Second

// MaxSignatureSkew bounds Options.SignatureSkew.
const MaxSignatureSkew = 15 * time.Minute

// authenticate returns the principal of a call: the access key of its
// signature, which must verify with that principal's secret (package
// access: a file principal's derived secret, or the -auth-token for any
// other access key); without a signature, the subject of a client
// certificate the TLS layer verified. Anonymous when no credentials are
// configured.
func (s *Server) authenticate(ctx context.Context) (*access.Principal, error) {
	if s.access.Open() {
		return access.Anonymous, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	date, auth := first(md, "x-mq-date-time"), first(md, "authorization")
	if date == "" || auth == "" {
		if p, ok := s.certPrincipal(ctx); ok {
			return p, nil
		}
		return nil, gstatus.Error(codes.Unauthenticated, "this broker requires credentials: sign requests with an access key and its secret")
	}
	t, err := time.Parse("20060102T150405Z", date)
	if err != nil {
		return nil, gstatus.Error(codes.Unauthenticated, "x-mq-date-time is not yyyyMMddTHHmmssZ")
	}
	sig, accessKey := "", ""
	for _, part := range strings.Split(strings.TrimPrefix(auth, "MQv2-HMAC-SHA1 "), ",") {
		part = strings.TrimSpace(part)
		if v, found := strings.CutPrefix(part, "Signature="); found {
			sig = v
		}
		if v, found := strings.CutPrefix(part, "Credential="); found {
			accessKey, _, _ = strings.Cut(v, "/")
		}
	}
	p, secret, known := s.access.SigningSecret(accessKey)
	h := hmac.New(sha1.New, []byte(secret))
	h.Write([]byte(date))
	got, err := hex.DecodeString(sig)
	if !known || err != nil || !hmac.Equal(got, h.Sum(nil)) {
		return nil, gstatus.Error(codes.Unauthenticated, "the request's signature does not verify with the secret of its access key")
	}
	// Checked after the signature, so only a holder of the secret learns
	// the broker's clock. The date-time names a whole second: the call
	// was signed within the second after it.
	now := time.Now()
	if d := now.Sub(t); d > s.opts.SignatureSkew+time.Second || d < -s.opts.SignatureSkew {
		return nil, gstatus.Errorf(codes.Unauthenticated, "x-mq-date-time %s is %v from the broker's clock %s; the broker accepts %v (its -grpc-signature-skew): sync the client's clock (NTP), in UTC",
			date, d.Round(time.Second), now.UTC().Format("20060102T150405Z"), s.opts.SignatureSkew)
	}
	return p, nil
}

// certPrincipal is the file principal named by the subject common name of
// the call's client certificate, when the TLS layer verified one.
func (s *Server) certPrincipal(ctx context.Context) (*access.Principal, bool) {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return nil, false
	}
	ti, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil, false
	}
	return s.access.Named(ti.State.VerifiedChains[0][0].Subject.CommonName)
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// authUnary authenticates a call, checks what its request needs
// (permissions.go) before any handler looks a resource up, and records
// message-management calls in the audit trail.
func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	p, err := s.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	n, err := s.permit(ctx, p, req)
	if err != nil {
		return nil, err
	}
	resp, err := h(ctx, req)
	if n.action != "" && access.Audited(n.action) {
		s.audit.Record(ctx, "grpc", p.Name, n.action, n.resource, auditResult(resp, err), info.FullMethod)
	}
	return resp, err
}

// authStream authenticates a stream, and checks each request it receives
// (a receive's one request; telemetry's commands need no permission).
func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	p, err := s.authenticate(ss.Context())
	if err != nil {
		return err
	}
	return h(srv, &checkedStream{ServerStream: ss, s: s, p: p})
}

// checkedStream checks every request a stream receives before the
// handler sees it.
type checkedStream struct {
	grpc.ServerStream
	s *Server
	p *access.Principal
}

func (c *checkedStream) RecvMsg(m any) error {
	if err := c.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	_, err := c.s.permit(c.Context(), c.p, m)
	return err
}
