package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// floorRMQ is a bare RocketMQ 5 MessagingService: SendMessage and
// AckMessage answer OK at once, with nothing stored; every other call is
// left unimplemented. It is the gRPC floor of the adapter's pairs.
type floorRMQ struct {
	pb.UnimplementedMessagingServiceServer
}

var floorOK = &pb.Status{Code: pb.Code_OK, Message: "OK"}

func (floorRMQ) SendMessage(_ context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	out := &pb.SendMessageResponse{Status: floorOK, Entries: make([]*pb.SendResultEntry, len(req.Messages))}
	for i, m := range req.Messages {
		out.Entries[i] = &pb.SendResultEntry{Status: floorOK, MessageId: m.GetSystemProperties().GetMessageId()}
	}
	return out, nil
}

func (floorRMQ) AckMessage(_ context.Context, req *pb.AckMessageRequest) (*pb.AckMessageResponse, error) {
	out := &pb.AckMessageResponse{Status: floorOK, Entries: make([]*pb.AckMessageResultEntry, len(req.Entries))}
	for i, e := range req.Entries {
		out.Entries[i] = &pb.AckMessageResultEntry{Status: floorOK, MessageId: e.MessageId, ReceiptHandle: e.ReceiptHandle}
	}
	return out, nil
}

// grpcFloor is callers goroutines sharing conns plaintext connections to
// a bare floorRMQ, each calling SendMessage (ack false) or AckMessage
// (ack true) with one message or one entry, as the official client does,
// with the metadata it sends on every call.
func (l *lab) grpcFloor(callers, conns int, ack bool) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	srv := grpc.NewServer()
	pb.RegisterMessagingServiceServer(srv, floorRMQ{})
	go srv.Serve(ln)
	defer srv.Stop()
	target := ln.Addr().String()
	topic := &pb.Resource{Name: "floor"}
	clients := make([]pb.MessagingServiceClient, conns)
	for i := range clients {
		cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return 0, err
		}
		defer cc.Close()
		clients[i] = pb.NewMessagingServiceClient(cc)
	}
	var next, seq atomic.Int64
	digest := fmt.Sprintf("%X", crc32.ChecksumIEEE(l.body))
	return during(callers, l.c.duration, func(ctx context.Context) (int, error) {
		c := clients[next.Add(1)%int64(len(clients))]
		id := fmt.Sprintf("01%030X", seq.Add(1))
		ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-language", "GOLANG", "x-mq-protocol", "v2",
			"x-mq-client-version", "5.0.0", "x-mq-request-id", id, "x-mq-client-id", "netbench@floor",
			"x-mq-date-time", time.Now().UTC().Format("20060102T150405Z"), "x-mq-namespace", "")
		if ack {
			r, err := c.AckMessage(ctx, &pb.AckMessageRequest{Group: &pb.Resource{Name: "floor-group"}, Topic: topic,
				Entries: []*pb.AckMessageEntry{{MessageId: id, ReceiptHandle: "floor-handle-" + strconv.FormatInt(seq.Load(), 10)}}})
			if err == nil && r.GetStatus().GetCode() != pb.Code_OK {
				err = fmt.Errorf("floor ack: %v", r.GetStatus())
			}
			return 1, err
		}
		now := time.Now()
		m := &pb.Message{Topic: topic, Body: l.body, SystemProperties: &pb.SystemProperties{
			MessageId: id, BodyEncoding: pb.Encoding_IDENTITY, MessageType: pb.MessageType_DELAY,
			BornTimestamp: timestamppb.New(now), BornHost: "netbench", DeliveryTimestamp: timestamppb.New(now.Add(l.c.delay)),
			BodyDigest: &pb.Digest{Type: pb.DigestType_CRC32, Checksum: digest}}}
		r, err := c.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{m}})
		if err == nil && r.GetStatus().GetCode() != pb.Code_OK {
			err = fmt.Errorf("floor send: %v", r.GetStatus())
		}
		return 1, err
	})
}
