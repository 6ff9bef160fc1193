package rocketmq_test

import (
	"sync"
	"testing"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A resource in a namespace is refused, everywhere a resource is named:
// reading the name alone let two namespaces share a topic (a review sent
// in one namespace and received in another).
func TestNamespacesAreRefused(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	topic := &pb.Resource{Name: "orders", ResourceNamespace: "tenant-a"}
	group := &pb.Resource{Name: "g", ResourceNamespace: "tenant-a"}
	m := rawMessage("orders", "m1", []byte("x"), nil)
	m.Topic = topic
	sr, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{m}})
	if err != nil || sr.GetStatus().GetCode() != pb.Code_BAD_REQUEST {
		t.Fatalf("send in a namespace: %v %v", sr.GetStatus(), err)
	}
	rq, err := c.QueryRoute(ctx, &pb.QueryRouteRequest{Topic: topic, Endpoints: endpoints(b.grpc)})
	if err != nil || rq.GetStatus().GetCode() != pb.Code_BAD_REQUEST {
		t.Fatalf("route in a namespace: %v %v", rq.GetStatus(), err)
	}
	ar, err := c.AckMessage(ctx, &pb.AckMessageRequest{Topic: &pb.Resource{Name: "orders"}, Group: group,
		Entries: []*pb.AckMessageEntry{{MessageId: "m1", ReceiptHandle: "x"}}})
	if err != nil || ar.GetStatus().GetCode() != pb.Code_BAD_REQUEST {
		t.Fatalf("ack in a namespace: %v %v", ar.GetStatus(), err)
	}
	// Without a namespace the same send is taken.
	m = rawMessage("orders", "m1", []byte("x"), nil)
	if sr, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{m}}); err != nil || sr.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("send without a namespace: %v %v", sr.GetStatus(), err)
	}
}

// A receipt handle that cannot be one is INVALID_RECEIPT_HANDLE (on which
// the official clients stop retrying), not BAD_REQUEST.
func TestMalformedReceiptHandles(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	m := rawMessage("t", "m1", []byte("x"), nil)
	if sr, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{m}}); err != nil || sr.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("send: %v %v", sr.GetStatus(), err)
	}
	for _, h := range []string{"", "AAAA", "not a receipt at all, not even base64!!"} {
		ar, err := c.AckMessage(ctx, &pb.AckMessageRequest{Topic: &pb.Resource{Name: "t"}, Group: &pb.Resource{Name: "g"},
			Entries: []*pb.AckMessageEntry{{MessageId: "m1", ReceiptHandle: h}}})
		if err != nil || ar.GetStatus().GetCode() != pb.Code_INVALID_RECEIPT_HANDLE {
			t.Errorf("ack with receipt %q: %v %v", h, ar.GetStatus(), err)
		}
		cr, err := c.ChangeInvisibleDuration(ctx, &pb.ChangeInvisibleDurationRequest{Topic: &pb.Resource{Name: "t"}, Group: &pb.Resource{Name: "g"},
			ReceiptHandle: h, InvisibleDuration: durationpb.New(60e9), MessageId: "m1"})
		if err != nil || cr.GetStatus().GetCode() != pb.Code_INVALID_RECEIPT_HANDLE {
			t.Errorf("change invisibility with receipt %q: %v %v", h, cr.GetStatus(), err)
		}
	}
}

// A FIFO send racing a normal first send to a new topic is never answered
// OK while stored in a topic that is not FIFO: a topic's kind is settled
// by whichever creation won, and a FIFO message to a normal topic refused.
func TestFIFOSendRacingANormalCreate(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	for i := range 30 {
		topic := "race" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		fifo := rawMessage(topic, "f", []byte("x"), nil)
		fifo.SystemProperties.MessageType = pb.MessageType_FIFO
		g := "g"
		fifo.SystemProperties.MessageGroup = &g
		normal := rawMessage(topic, "n", []byte("x"), nil)
		var wg sync.WaitGroup
		var fifoCode pb.Code
		wg.Add(2)
		go func() {
			defer wg.Done()
			r, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{fifo}})
			if err != nil {
				t.Error(err)
				return
			}
			fifoCode = r.GetStatus().GetCode()
		}()
		go func() {
			defer wg.Done()
			if _, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{normal}}); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		rq, err := c.QueryRoute(ctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: topic}, Endpoints: endpoints(b.grpc)})
		if err != nil || len(rq.GetMessageQueues()) == 0 {
			t.Fatalf("route: %v %v", rq.GetStatus(), err)
		}
		isFIFO := false
		for _, mt := range rq.GetMessageQueues()[0].GetAcceptMessageTypes() {
			isFIFO = isFIFO || mt == pb.MessageType_FIFO
		}
		if fifoCode == pb.Code_OK && !isFIFO {
			t.Fatalf("round %d: a FIFO send answered OK was stored in a topic that is not FIFO", i)
		}
	}
}

// Too many properties is MESSAGE_PROPERTIES_TOO_LARGE, not a body too
// large: the client's error names what to fix.
func TestTooManyPropertiesIsNotABodyTooLarge(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	m := rawMessage("t", "m1", []byte("x"), nil)
	m.UserProperties = map[string]string{}
	for i := range 129 { // RocketMQ's limit, the broker's default, is 128
		m.UserProperties["p"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	sr, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{m}})
	if err != nil || sr.GetStatus().GetCode() != pb.Code_MESSAGE_PROPERTIES_TOO_LARGE {
		t.Fatalf("129 properties: %v %v", sr.GetStatus(), err)
	}
}

// A dead-letter topic's route says READ: the broker fills it, and a send
// to it is refused.
func TestDeadLetterRouteIsReadOnly(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	rq, err := c.QueryRoute(ctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: "%DLQ%t.g"}, Endpoints: endpoints(b.grpc)})
	if err != nil || rq.GetStatus().GetCode() != pb.Code_OK || len(rq.GetMessageQueues()) == 0 {
		t.Fatalf("route of a dead-letter topic: %v %v", rq.GetStatus(), err)
	}
	for _, q := range rq.GetMessageQueues() {
		if q.GetPermission() != pb.Permission_READ {
			t.Fatalf("a dead-letter queue with permission %v, want READ", q.GetPermission())
		}
	}
	sr, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{rawMessage("%DLQ%t.g", "m1", []byte("x"), nil)}})
	if err != nil || sr.GetStatus().GetCode() == pb.Code_OK {
		t.Fatalf("send to a dead-letter topic: %v %v", sr.GetStatus(), err)
	}
}
