package rocketmq

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// failingStream is a receive stream whose client is gone: every Send fails.
type failingStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f failingStream) Send(*pb.ReceiveMessageResponse) error { return errors.New("client gone") }
func (f failingStream) Context() context.Context              { return f.ctx }
func (f failingStream) SetHeader(metadata.MD) error           { return nil }
func (f failingStream) SendHeader(metadata.MD) error          { return nil }
func (f failingStream) SetTrailer(metadata.MD)                {}

// A receive whose answer cannot be sent gives its messages back at once,
// their attempt not counted, instead of hiding them for the invisible
// duration (up to 12 h) and counting a delivery no one saw.
func TestReceiveNotSentGivesLeasesBack(t *testing.T) {
	eng := engineWithOne(t)
	ctx := context.Background()
	s := New(eng, Options{})
	req := &pb.ReceiveMessageRequest{Group: &pb.Resource{Name: "g"}, MessageQueue: &pb.MessageQueue{Topic: &pb.Resource{Name: "t"}},
		BatchSize: 1, InvisibleDuration: durationpb.New(12 * time.Hour), LongPollingTimeout: durationpb.New(5 * time.Second)}
	if err := s.ReceiveMessage(req, failingStream{ctx: ctx}); err == nil {
		t.Fatal("a receive whose every send failed reported no error")
	}
	rs, err := eng.Receive(ctx, engine.ReceiveRequest{Topic: "t", Group: "g", Wait: 5 * time.Second})
	if err != nil || len(rs) != 1 || rs[0].Attempt != 1 {
		t.Fatalf("after a receive that could not be sent: %+v %v; want the message at once, attempt 1", rs, err)
	}
}

// A client's lease renewals stop with its last telemetry stream, not with
// a termination call while a stream of that ID is open (another connection
// may name any ID), nor with the end of an old stream after a reconnect (a
// review found both stopping a live consumer's renewals).
func TestRenewalsEndWithTheClientsLastStream(t *testing.T) {
	s := New(engineWithOne(t), Options{})
	s.renew.add("c1", "t", "g", []string{"r1"})
	first := s.streamOpened("c1")
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-mq-client-id", "c1"))
	if _, err := s.NotifyClientTermination(ctx, &pb.NotifyClientTerminationRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := s.renew.count(); n != 1 {
		t.Fatalf("a termination call while c1's stream is open stopped its renewals (%d left)", n)
	}
	second := s.streamOpened("c1") // the client reconnects
	first()
	if n := s.renew.count(); n != 1 {
		t.Fatalf("the end of c1's old stream stopped its renewals (%d left)", n)
	}
	second()
	if n := s.renew.count(); n != 0 {
		t.Fatalf("%d renewals left after c1's last stream ended", n)
	}
	// With no stream open, a termination call forgets at once.
	s.renew.add("c2", "t", "g", []string{"r2"})
	ctx2 := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-mq-client-id", "c2"))
	if _, err := s.NotifyClientTermination(ctx2, &pb.NotifyClientTerminationRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := s.renew.count(); n != 0 {
		t.Fatalf("%d renewals left after c2's termination", n)
	}
}

// engineWithOne opens an engine on a temporary directory, closed at the
// test's end, holding one visible message "x" in topic t.
func engineWithOne(t *testing.T) *engine.Engine {
	t.Helper()
	eng, err := engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if _, err := eng.Send(context.Background(), message.Message{Topic: "t", Body: []byte("x")}, message.When{}); err != nil {
		t.Fatal(err)
	}
	return eng
}
