package client

import (
	"context"
	"net"
	"net/http"
	"reflect"
	"syscall"
	"testing"
)

// TestIdempotentSendRetries: a send with a dedup ID, given or drawn, is
// retried after an ambiguous failure with the same body (the same ID);
// one without is not.
func TestIdempotentSendRetries(t *testing.T) {
	ctx := context.Background()
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	cases := []struct {
		name string
		opts []Option
		msg  Message
		sent int
	}{
		{"caller's dedup id", nil, Message{Body: []byte("b"), DedupID: "op-1"}, 1},
		{"drawn dedup id", []Option{WithIdempotentSends()}, Message{Body: []byte("b")}, 1},
		{"no dedup id", nil, Message{Body: []byte("b")}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, ok(`{"id":"1-1","topic":"t","queue":0,"due":1,"due_time":"x","duplicate":true}`))
			c := f.client(append(tc.opts, WithHTTPClient(&http.Client{Transport: &failingTransport{n: 1, err: reset}}))...)
			r, err := c.Send(ctx, "t", tc.msg)
			if n := len(f.requests()); n != tc.sent {
				t.Fatalf("%d requests reached the server, want %d (err %v)", n, tc.sent, err)
			}
			if tc.sent == 1 && (err != nil || !r.Duplicate) {
				t.Fatalf("retry: %+v %v", r, err)
			}
		})
	}
	// 502 from a proxy: both attempts reach the server with one dedup ID.
	f := newFake(t, canned{status: 502, body: "proxy"}, ok(`{"receipts":[]}`))
	c := f.client(WithIdempotentSends())
	if _, err := c.SendBatch(ctx, "t", []Message{{Body: []byte("a")}, {Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || !reflect.DeepEqual(reqs[0].Body, reqs[1].Body) {
		t.Fatalf("batch retry: %d requests", len(reqs))
	}
	msgs := reqs[0].Body["messages"].([]any)
	a, b := msgs[0].(map[string]any)["dedup_id"], msgs[1].(map[string]any)["dedup_id"]
	if a == nil || a == b || len(a.(string)) != 32 {
		t.Fatalf("drawn dedup ids %v %v", a, b)
	}
}
