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
	"google.golang.org/grpc/metadata"
	gstatus "google.golang.org/grpc/status"
)

// The RocketMQ 5 clients sign each call with their access secret:
//
//	x-mq-date-time: 20060102T150405Z                       (UTC, the signed text)
//	authorization:  MQv2-HMAC-SHA1 Credential=<access key>/<region>/Rocketmq,
//	                SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(secret, date-time)>
//
// With Options.AccessSecret set, a call is accepted only if its signature
// verifies and its date-time is within Options.SignatureSkew of the
// broker's wall clock.
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

// authorize checks the signature of a call; nil when no secret is set.
func (s *Server) authorize(ctx context.Context) error {
	if s.opts.AccessSecret == "" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	date, auth := first(md, "x-mq-date-time"), first(md, "authorization")
	if date == "" || auth == "" {
		return gstatus.Error(codes.Unauthenticated, "this broker requires credentials: sign requests with the access secret")
	}
	t, err := time.Parse("20060102T150405Z", date)
	if err != nil {
		return gstatus.Error(codes.Unauthenticated, "x-mq-date-time is not yyyyMMddTHHmmssZ")
	}
	sig := ""
	for _, part := range strings.Split(strings.TrimPrefix(auth, "MQv2-HMAC-SHA1 "), ",") {
		if v, found := strings.CutPrefix(strings.TrimSpace(part), "Signature="); found {
			sig = v
		}
	}
	h := hmac.New(sha1.New, []byte(s.opts.AccessSecret))
	h.Write([]byte(date))
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, h.Sum(nil)) {
		return gstatus.Error(codes.Unauthenticated, "the request's signature does not verify with this broker's access secret")
	}
	// Checked after the signature, so only a holder of the secret learns
	// the broker's clock. The date-time names a whole second: the call
	// was signed within the second after it.
	now := time.Now()
	if d := now.Sub(t); d > s.opts.SignatureSkew+time.Second || d < -s.opts.SignatureSkew {
		return gstatus.Errorf(codes.Unauthenticated, "x-mq-date-time %s is %v from the broker's clock %s; the broker accepts %v (its -grpc-signature-skew): sync the client's clock (NTP), in UTC",
			date, d.Round(time.Second), now.UTC().Format("20060102T150405Z"), s.opts.SignatureSkew)
	}
	return nil
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.authorize(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}
