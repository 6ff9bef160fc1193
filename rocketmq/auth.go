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
// verifies and its date-time is within signatureSkew of the broker's
// clock (a bound on replays of a captured signature).
const signatureSkew = 15 * time.Minute

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
	if d := time.Since(t); d > signatureSkew || d < -signatureSkew {
		return gstatus.Errorf(codes.Unauthenticated, "x-mq-date-time %s is more than %v away from the broker's clock", date, signatureSkew)
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
