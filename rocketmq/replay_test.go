package rocketmq_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	gstatus "google.golang.org/grpc/status"

	hgbroker "github.com/hourglass-mq/hourglass/broker"
)

// signedAt is a call context signed as the official clients sign: an
// HMAC-SHA1 of the date-time alone, with secret.
func signedAt(t *testing.T, secret string, at time.Time) context.Context {
	date := at.UTC().Format("20060102T150405Z")
	h := hmac.New(sha1.New, []byte(secret))
	h.Write([]byte(date))
	return metadata.AppendToOutgoingContext(bounded(t), "x-mq-date-time", date,
		"authorization", "MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature="+hex.EncodeToString(h.Sum(nil)))
}

// TestCapturedSignatureReplayWindow: a signature covers only its
// date-time, so a captured one works for any call until its date-time is
// too far from the broker's clock. That was 15 minutes; it is 30 s by
// default (-grpc-signature-skew). A signature 2 minutes old is refused,
// with an error that names the setting; one 10 s old is accepted; a
// future one beyond the skew is refused; a forged one is refused without
// a word about the clock. The setting widens the window for clients with
// worse clocks.
func TestCapturedSignatureReplayWindow(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-token"
	b := startBroker(t, func(c *hgbroker.Config) { c.AuthToken = secret })
	c := dial(t, b.grpc)
	heartbeat := func(ctx context.Context) error {
		_, err := c.Heartbeat(ctx, &pb.HeartbeatRequest{})
		return err
	}
	now := time.Now()
	if err := heartbeat(signedAt(t, secret, now.Add(-10*time.Second))); err != nil {
		t.Fatalf("a signature 10 s old: %v", err)
	}
	for _, age := range []time.Duration{2 * time.Minute, 14 * time.Minute, -2 * time.Minute} {
		err := heartbeat(signedAt(t, secret, now.Add(-age)))
		if gstatus.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "-grpc-signature-skew") {
			t.Errorf("a signature %v old: %v; want Unauthenticated naming -grpc-signature-skew", age, err)
		}
	}
	err := heartbeat(signedAt(t, "guessed", now.Add(-time.Hour)))
	if gstatus.Code(err) != codes.Unauthenticated || strings.Contains(err.Error(), "clock") {
		t.Errorf("a forged signature: %v; want Unauthenticated that tells nothing of the clock", err)
	}

	wide := startBroker(t, func(c *hgbroker.Config) { c.AuthToken = secret; c.GRPCSignatureSkew = 5 * time.Minute })
	wc := dial(t, wide.grpc)
	if _, err := wc.Heartbeat(signedAt(t, secret, now.Add(-2*time.Minute)), &pb.HeartbeatRequest{}); err != nil {
		t.Errorf("a signature 2 minutes old under -grpc-signature-skew 5m: %v", err)
	}
	if _, err := wc.Heartbeat(signedAt(t, secret, now.Add(-6*time.Minute)), &pb.HeartbeatRequest{}); gstatus.Code(err) != codes.Unauthenticated {
		t.Errorf("a signature 6 minutes old under -grpc-signature-skew 5m: %v", err)
	}
}
