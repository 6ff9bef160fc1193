package rocketmq_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestResendsStoreOnce: the clients resend a message after a lost answer
// with the same message ID and a new born timestamp, possibly while the
// first attempt is still in flight. However the attempts interleave, one
// message is stored, every attempt is answered OK with its offset, and a
// consumer receives it once. The same ID with another body is refused.
func TestResendsStoreOnce(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	send := func(msgs ...*pb.Message) *pb.SendMessageResponse {
		t.Helper()
		r, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	attempt := func(id, body string, bornMs int64) *pb.Message {
		m := rawMessage("dedup", id, []byte(body), nil)
		m.SystemProperties.BornTimestamp = timestamppb.New(time.UnixMilli(bornMs))
		return m
	}

	// Concurrent attempts, each with its own born timestamp.
	const attempts = 16
	offsets := make([]int64, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{attempt("race-1", "once", 1_700_000_000_000+int64(i))}})
			if err != nil || r.GetStatus().GetCode() != pb.Code_OK {
				t.Errorf("attempt %d: %v %v", i, r.GetStatus(), err)
				return
			}
			offsets[i] = r.GetEntries()[0].GetOffset()
		}()
	}
	wg.Wait()
	for i, o := range offsets {
		if o != offsets[0] {
			t.Errorf("attempt %d stored at offset %d, attempt 0 at %d: stored twice", i, o, offsets[0])
		}
	}

	// Two copies in one request are one message too.
	r := send(attempt("pair-1", "twin", 1), attempt("pair-1", "twin", 2))
	if r.GetStatus().GetCode() != pb.Code_OK || len(r.GetEntries()) != 2 ||
		r.GetEntries()[0].GetOffset() != r.GetEntries()[1].GetOffset() {
		t.Errorf("two copies in one request: %v", r)
	}

	// The same ID with another body is a client error, said so.
	if r := send(attempt("race-1", "another body", 3)); r.GetStatus().GetCode() != pb.Code_ILLEGAL_MESSAGE_ID {
		t.Errorf("same ID, another body: %v", r.GetStatus())
	}

	// The topic holds race-1 and pair-1, once each.
	if n := storedIn(t, b, "dedup"); n != 2 {
		t.Errorf("the topic holds %d messages, want 2 (race-1 and pair-1 once each)", n)
	}
}

// storedIn returns how many messages a topic was given, pending or
// visible, as the HTTP API reports them.
func storedIn(t *testing.T, b broker, topic string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + b.http + "/v1/topics/" + topic)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct{ Pending, Visible int64 }
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("describe %s: %d %v", topic, resp.StatusCode, err)
	}
	return info.Pending + info.Visible
}

// TestDelayedResendAfterItsTime: a delayed message resent after its
// delivery time passed (the first answer was lost for that long) is the
// same message, not a conflict and not a second one.
func TestDelayedResendAfterItsTime(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	at := timestamppb.New(time.Now().Add(200 * time.Millisecond))
	first, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{withDelivery(rawMessage("late", "d-1", []byte("x"), nil), at)}})
	if err != nil || first.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("first send: %v %v", first.GetStatus(), err)
	}
	for time.Now().Before(at.AsTime().Add(50 * time.Millisecond)) {
		time.Sleep(20 * time.Millisecond)
	}
	again, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{withDelivery(rawMessage("late", "d-1", []byte("x"), nil), at)}})
	if err != nil || again.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("resend: %v %v", again.GetStatus(), err)
	}
	if a, b := first.GetEntries()[0], again.GetEntries()[0]; a.GetOffset() != b.GetOffset() || a.GetRecallHandle() != b.GetRecallHandle() {
		t.Errorf("the resend was stored again: first %v, resend %v", a, b)
	}
}

// TestSendRefusals: what RocketMQ refuses, hourglass refuses with the same
// code and a message that says why.
func TestSendRefusals(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	c := dial(t, b.grpc)
	ctx := bounded(t)
	fifo := rawMessage("fifo-delay", "f-1", []byte("x"), nil)
	g := "group"
	fifo.SystemProperties.MessageGroup = &g
	fifo.SystemProperties.MessageType = pb.MessageType_FIFO
	fifo.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(time.Minute))
	r, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{fifo}})
	if err != nil || r.GetStatus().GetCode() != pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE {
		t.Errorf("FIFO message with a delivery timestamp: %v %v", r.GetStatus(), err)
	}
	var many []*pb.Message
	for i := range 1001 {
		many = append(many, rawMessage("many", fmt.Sprintf("m-%d", i), []byte("x"), nil))
	}
	r, err = c.SendMessage(ctx, &pb.SendMessageRequest{Messages: many})
	if err != nil || r.GetStatus().GetCode() != pb.Code_BAD_REQUEST {
		t.Errorf("1001 messages in one request: %v %v", r.GetStatus(), err)
	}
	long := rawMessage("t", fmt.Sprintf("%0300d", 7), []byte("x"), nil)
	r, err = c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{long}})
	if err != nil || r.GetStatus().GetCode() != pb.Code_ILLEGAL_MESSAGE_ID {
		t.Errorf("a 300-byte message ID: %v %v", r.GetStatus(), err)
	}
}
