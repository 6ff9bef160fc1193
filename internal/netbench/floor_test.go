package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// TestFloorServerAnswers checks that the bare HTTP floor reads a request
// and answers the canned bytes over HTTP/1.1 and over h2c, so that the
// floor pairs measure a round trip that moved what the broker's moves.
func TestFloorServerAnswers(t *testing.T) {
	answer := []byte(`{"id":"0123","topic":"t","due_time":"2026-12-07T00:00:00Z"}`)
	for _, h2c := range []bool{false, true} {
		fs, err := startFloorServer(answer, h2c)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: floorTransport(2, h2c)}
		resp, err := hc.Post("http://"+fs.addr+"/x", "application/json", bytes.NewReader([]byte(`{"body":"b"}`)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, answer) {
			t.Errorf("h2c %v: %d %q %v, want 200 %q", h2c, resp.StatusCode, got, err, answer)
		}
		if want := map[bool]int{false: 1, true: 2}[h2c]; resp.ProtoMajor != want {
			t.Errorf("h2c %v: answered over HTTP/%d, want HTTP/%d", h2c, resp.ProtoMajor, want)
		}
		fs.close()
	}
}

// TestFloorRMQAnswers checks the bare gRPC floor's answers: one OK entry
// for every message sent or acked, naming it.
func TestFloorRMQAnswers(t *testing.T) {
	var f floorRMQ
	sent, err := f.SendMessage(context.Background(), &pb.SendMessageRequest{Messages: []*pb.Message{
		{SystemProperties: &pb.SystemProperties{MessageId: "a"}}, {SystemProperties: &pb.SystemProperties{MessageId: "b"}}}})
	if err != nil || len(sent.Entries) != 2 || sent.Entries[1].MessageId != "b" || sent.Status.Code != pb.Code_OK {
		t.Fatalf("SendMessage: %v %v", sent, err)
	}
	acked, err := f.AckMessage(context.Background(), &pb.AckMessageRequest{Entries: []*pb.AckMessageEntry{{MessageId: "c", ReceiptHandle: "h"}}})
	if err != nil || len(acked.Entries) != 1 || acked.Entries[0].ReceiptHandle != "h" || acked.Entries[0].Status.Code != pb.Code_OK {
		t.Fatalf("AckMessage: %v %v", acked, err)
	}
}
