package rocketmq_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	gstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	hgbroker "github.com/hourglass-mq/hourglass/broker"
	"github.com/hourglass-mq/hourglass/engine"
)

// dial returns a raw protocol client of the broker, for what the official
// client never sends (bad digests, unsupported RPCs).
func dial(t *testing.T, addr string) pb.MessagingServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewMessagingServiceClient(conn)
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "raw-test")
}

func endpoints(addr string) *pb.Endpoints {
	host, port, _ := strings.Cut(addr, ":")
	p, _ := strconv.Atoi(port)
	return &pb.Endpoints{Scheme: pb.AddressScheme_IPv4, Addresses: []*pb.Address{{Host: host, Port: int32(p)}}}
}

func rawMessage(topic, id string, body []byte, d *pb.Digest) *pb.Message {
	return &pb.Message{Topic: &pb.Resource{Name: topic}, Body: body,
		SystemProperties: &pb.SystemProperties{MessageId: id, MessageType: pb.MessageType_NORMAL, BodyDigest: d,
			BornTimestamp: timestamppb.Now()}}
}

func TestRefusalsAndUnsupported(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	send := func(m *pb.Message) pb.Code {
		r, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{m}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetStatus().GetCode()
	}
	for _, tc := range []struct {
		name string
		m    *pb.Message
		want pb.Code
	}{
		{"good digest", rawMessage("t", "m1", []byte("hello"), &pb.Digest{Type: pb.DigestType_CRC32, Checksum: "3610A686"}), pb.Code_OK},
		{"bad digest", rawMessage("t", "m2", []byte("hellO"), &pb.Digest{Type: pb.DigestType_CRC32, Checksum: "3610A686"}), pb.Code_MESSAGE_CORRUPTED},
		{"bad md5", rawMessage("t", "m3", []byte("hello"), &pb.Digest{Type: pb.DigestType_MD5, Checksum: "00"}), pb.Code_MESSAGE_CORRUPTED},
		{"no message id", rawMessage("t", "", []byte("x"), nil), pb.Code_ILLEGAL_MESSAGE_ID},
		{"empty body", rawMessage("t", "m4", nil, nil), pb.Code_MESSAGE_BODY_EMPTY},
		{"bad topic", rawMessage("a/b", "m5", []byte("x"), nil), pb.Code_BAD_REQUEST},
		// Its milliseconds would overflow into the past: an early delivery.
		{"huge delivery timestamp", withDelivery(rawMessage("t", "m6", []byte("x"), nil), &timestamppb.Timestamp{Seconds: 1 << 62}), pb.Code_ILLEGAL_DELIVERY_TIME},
		{"negative delivery timestamp", withDelivery(rawMessage("t", "m7", []byte("x"), nil), &timestamppb.Timestamp{Seconds: -1 << 62}), pb.Code_ILLEGAL_DELIVERY_TIME},
	} {
		if got := send(tc.m); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	m := rawMessage("t", "m6", []byte("x"), nil)
	m.UserProperties = map[string]string{"rocketmq.keys": "forged"}
	if got := send(m); got != pb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY {
		t.Errorf("reserved property: %v", got)
	}
	m = rawMessage("t", "m7", []byte("x"), nil)
	m.SystemProperties.MessageType = pb.MessageType_TRANSACTION
	if got := send(m); got != pb.Code_NOT_IMPLEMENTED {
		t.Errorf("transactional message: %v", got)
	}
	m = rawMessage("t", "m8", []byte("x"), nil)
	m.SystemProperties.MessageType = pb.MessageType_FIFO
	m.SystemProperties.MessageGroup = new(string)
	*m.SystemProperties.MessageGroup = "g"
	if got := send(m); got != pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE {
		t.Errorf("FIFO message to a normal topic: %v", got)
	}
	// A resend with the same message ID is not stored twice.
	r1, _ := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{rawMessage("t", "m1", []byte("hello"), nil)}})
	if r1.GetStatus().GetCode() != pb.Code_OK || r1.GetEntries()[0].GetMessageId() != "m1" {
		t.Errorf("resend: %v", r1)
	}
	rq, err := c.QueryRoute(ctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: "t"}, Endpoints: endpoints(b.grpc)})
	if err != nil || rq.GetStatus().GetCode() != pb.Code_OK || len(rq.GetMessageQueues()) == 0 {
		t.Fatalf("QueryRoute: %v %v", rq, err)
	}
	for _, q := range rq.GetMessageQueues() {
		if q.GetBroker().GetEndpoints().GetAddresses()[0].GetPort() != endpoints(b.grpc).Addresses[0].Port ||
			q.GetPermission() != pb.Permission_READ_WRITE || len(q.GetAcceptMessageTypes()) == 0 {
			t.Errorf("queue %v", q)
		}
	}
	if rq, _ := c.QueryRoute(ctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: "t"}}); rq.GetStatus().GetCode() != pb.Code_ILLEGAL_ACCESS_POINT {
		t.Errorf("QueryRoute without endpoints: %v", rq.GetStatus())
	}
	checkUnsupportedRPCs(ctx, t, c)
	checkReceiveDigestAndSQL(ctx, t, c, rq.GetMessageQueues()[0])
}

// checkUnsupportedRPCs checks that transactions and offsets are refused as
// not implemented, that an ack of a forged receipt and a forward of a
// missing one fail, and that a forward of a forged (or stale) receipt
// forwards nothing and says so, with OK: the official clients retry a
// forward on any other code for ever.
func checkUnsupportedRPCs(ctx context.Context, t *testing.T, c pb.MessagingServiceClient) {
	t.Helper()
	if r, err := c.EndTransaction(ctx, &pb.EndTransactionRequest{}); err != nil || r.GetStatus().GetCode() != pb.Code_NOT_IMPLEMENTED {
		t.Errorf("EndTransaction: %v %v", r, err)
	}
	if r, err := c.ForwardMessageToDeadLetterQueue(ctx, &pb.ForwardMessageToDeadLetterQueueRequest{}); err != nil || r.GetStatus().GetCode() != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Errorf("ForwardMessageToDeadLetterQueue without a receipt: %v %v", r, err)
	}
	if r, err := c.ForwardMessageToDeadLetterQueue(ctx, &pb.ForwardMessageToDeadLetterQueueRequest{Topic: &pb.Resource{Name: "t"}, Group: &pb.Resource{Name: "g"},
		ReceiptHandle: strings.Repeat("A", engine.ReceiptChars)}); err != nil || r.GetStatus().GetCode() != pb.Code_OK ||
		!strings.Contains(r.GetStatus().GetMessage(), "nothing forwarded") {
		t.Errorf("ForwardMessageToDeadLetterQueue of a forged receipt: %v %v", r, err)
	}
	if _, err := c.GetOffset(ctx, &pb.GetOffsetRequest{}); gstatus.Code(err) != codes.Unimplemented {
		t.Errorf("GetOffset: %v", err)
	}
	if r, _ := c.AckMessage(ctx, &pb.AckMessageRequest{Topic: &pb.Resource{Name: "t"}, Group: &pb.Resource{Name: "g"},
		Entries: []*pb.AckMessageEntry{{MessageId: "m1", ReceiptHandle: "forged"}}}); r.GetStatus().GetCode() == pb.Code_OK {
		t.Errorf("ack of a forged receipt: %v", r.GetStatus())
	}
}

// checkReceiveDigestAndSQL checks that the stored message m1 comes back
// from q with RocketMQ's CRC32 digest and that a SQL92 filter is refused
// at once.
func checkReceiveDigestAndSQL(ctx context.Context, t *testing.T, c pb.MessagingServiceClient, q *pb.MessageQueue) {
	t.Helper()
	// The stored message comes back with RocketMQ's CRC32 digest.
	rs, err := c.ReceiveMessage(ctx, &pb.ReceiveMessageRequest{Group: &pb.Resource{Name: "digest"}, MessageQueue: q,
		BatchSize: 1, InvisibleDuration: durationOf(time.Minute), LongPollingTimeout: durationOf(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	first, err := rs.Recv()
	if err != nil || first.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("receive status: %v %v", first, err)
	}
	m1, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if d := m1.GetMessage().GetSystemProperties().GetBodyDigest(); m1.GetMessage().GetSystemProperties().GetMessageId() != "m1" ||
		d.GetType() != pb.DigestType_CRC32 || d.GetChecksum() != "3610A686" {
		t.Errorf("received %v", m1.GetMessage().GetSystemProperties())
	}
	// A SQL92 filter is refused at once.
	st, err := c.ReceiveMessage(ctx, &pb.ReceiveMessageRequest{Group: &pb.Resource{Name: "g"}, MessageQueue: q,
		FilterExpression: &pb.FilterExpression{Type: pb.FilterType_SQL, Expression: "a > 1"}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || r.GetStatus().GetCode() != pb.Code_ILLEGAL_FILTER_EXPRESSION {
		t.Errorf("SQL filter: %v %v", r, err)
	}
}

// TestTelemetrySettingsAndShutdown checks the settings a client is given,
// and that a shutdown ends open telemetry streams and long polls instead
// of waiting for them.
func TestTelemetrySettingsAndShutdown(t *testing.T) {
	t.Parallel()
	// A drain longer than the test allows: the streams must end by themselves.
	b, stop := launch(t, func(c *hgbroker.Config) { c.DrainTimeout = 30 * time.Second })
	c := dial(t, b.grpc)
	rctx := bounded(t)
	tel, err := c.Telemetry(rctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(s *pb.Settings) *pb.Settings {
		if err := tel.Send(&pb.TelemetryCommand{Command: &pb.TelemetryCommand_Settings{Settings: s}}); err != nil {
			t.Fatal(err)
		}
		r, err := tel.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return r.GetSettings()
	}
	pub := ask(&pb.Settings{PubSub: &pb.Settings_Publishing{Publishing: &pb.Publishing{}}})
	if pub.GetPublishing().GetMaxBodySize() != int32(hgbroker.DefaultConfig().MaxBodyBytes) || !pub.GetPublishing().GetValidateMessageType() {
		t.Errorf("publishing settings %v", pub)
	}
	// The producer's own backoff policy comes back to a Java client (which
	// refuses settings without one) and not to a Go client.
	policy := &pb.RetryPolicy{MaxAttempts: 3, Strategy: &pb.RetryPolicy_ExponentialBackoff{
		ExponentialBackoff: &pb.ExponentialBackoff{Initial: durationOf(time.Second), Max: durationOf(time.Minute), Multiplier: 2}}}
	for lang, want := range map[pb.Language]bool{pb.Language_JAVA: true, pb.Language_GOLANG: false} {
		got := ask(&pb.Settings{UserAgent: &pb.UA{Language: lang}, BackoffPolicy: policy,
			PubSub: &pb.Settings_Publishing{Publishing: &pb.Publishing{}}}).GetBackoffPolicy()
		if (got.GetExponentialBackoff() != nil && got.GetMaxAttempts() == 3) != want {
			t.Errorf("%v producer: backoff policy %v in the settings; want echoed: %v", lang, got, want)
		}
	}
	sub := ask(&pb.Settings{PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{Group: &pb.Resource{Name: "g"}}}})
	if sub.GetSubscription().GetReceiveBatchSize() <= 0 || sub.GetSubscription().GetLongPollingTimeout().AsDuration() <= 0 ||
		sub.GetBackoffPolicy().GetMaxAttempts() <= 0 || sub.GetBackoffPolicy().GetExponentialBackoff() == nil {
		t.Errorf("subscription settings %v", sub)
	}
	rq, err := c.QueryRoute(rctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: "t"}, Endpoints: endpoints(b.grpc)})
	if err != nil {
		t.Fatal(err)
	}
	// A long poll of 30 s, open when the shutdown starts.
	poll, err := c.ReceiveMessage(rctx, &pb.ReceiveMessageRequest{Group: &pb.Resource{Name: "g"}, MessageQueue: rq.GetMessageQueues()[0],
		InvisibleDuration: durationOf(time.Minute), LongPollingTimeout: durationOf(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v: it waited for the telemetry stream or the long poll", d)
	}
	if r, err := poll.Recv(); err == nil && r.GetStatus().GetCode() != pb.Code_MESSAGE_NOT_FOUND {
		t.Errorf("the long poll ended with %v", r)
	}
}

func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// withDelivery sets m's delivery timestamp and makes it a DELAY message.
func withDelivery(m *pb.Message, ts *timestamppb.Timestamp) *pb.Message {
	m.SystemProperties.DeliveryTimestamp = ts
	m.SystemProperties.MessageType = pb.MessageType_DELAY
	return m
}

// TestBatchWithinTheRequestLimit: a SendMessage batch is bounded by
// -max-request-bytes, as an HTTP batch is, not by one message's size: 200
// messages of 30 KB (6 MB, under the default 8 MiB) are stored, and a
// batch over the limit is refused whole.
func TestBatchWithinTheRequestLimit(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	batch := func(n int) *pb.SendMessageRequest {
		req := &pb.SendMessageRequest{}
		for i := range n {
			req.Messages = append(req.Messages, rawMessage("bulk", fmt.Sprint("m-", n, "-", i), make([]byte, 30_000), nil))
		}
		return req
	}
	r, err := c.SendMessage(ctx, batch(200))
	if err != nil || r.GetStatus().GetCode() != pb.Code_OK || len(r.GetEntries()) != 200 {
		t.Fatalf("200 messages of 30 KB: %v %v", r.GetStatus(), err)
	}
	if _, err := c.SendMessage(ctx, batch(300)); gstatus.Code(err) != codes.ResourceExhausted {
		t.Fatalf("300 messages of 30 KB (9 MB, over the 8 MiB limit): %v, want ResourceExhausted", err)
	}
}
