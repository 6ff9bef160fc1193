package client

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestEndpoints checks, for every method, the request it sends (method,
// escaped path, JSON body) and how it decodes the contract's response.
func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_123)
	cases := []struct {
		name     string
		response string
		call     func(c *Client) (any, error)
		method   string
		path     string
		body     map[string]any
		want     any
	}{
		{
			name:     "send",
			response: `{"id":"1-2","topic":"orders","queue":3,"due":1700000010000,"due_time":"2023-11-14T22:13:30.000Z"}`,
			call: func(c *Client) (any, error) {
				return c.Send(ctx, "orders", Message{Key: "order-123", Tag: "close", Group: "g", Properties: map[string]string{"a": "b"},
					Body: []byte("close unpaid order 123"), When: After(10 * time.Second)})
			},
			method: "POST", path: "/v1/topics/orders/messages",
			body: map[string]any{"key": "order-123", "tag": "close", "group": "g", "properties": map[string]any{"a": "b"},
				"body": "close unpaid order 123", "delay": "10s"},
			want: Receipt{ID: "1-2", Topic: "orders", Queue: 3, Due: 1700000010000, DueTime: "2023-11-14T22:13:30.000Z"},
		},
		{
			name:     "send binary at",
			response: `{"id":"1-3","topic":"a b","queue":0,"due":1700000000123}`,
			call: func(c *Client) (any, error) {
				return c.Send(ctx, "a b", Message{Body: []byte{0xff, 0x00}, When: AtTime(at)})
			},
			method: "POST", path: "/v1/topics/a%20b/messages",
			body: map[string]any{"body_base64": "/wA=", "at": float64(1_700_000_000_123)},
			want: Receipt{ID: "1-3", Topic: "a b", Due: 1700000000123},
		},
		{
			name:     "batch",
			response: `{"receipts":[{"id":"1-4","topic":"t","queue":1,"due":5},{"id":"1-5","topic":"t","queue":2,"due":6}]}`,
			call: func(c *Client) (any, error) {
				return c.SendBatch(ctx, "t", []Message{{Body: []byte("x"), When: AtLevel(3)}, {Body: []byte("")}})
			},
			method: "POST", path: "/v1/topics/t/batch",
			body: map[string]any{"messages": []any{map[string]any{"body": "x", "level": float64(3)}, map[string]any{"body": ""}}},
			want: []Receipt{{ID: "1-4", Topic: "t", Queue: 1, Due: 5}, {ID: "1-5", Topic: "t", Queue: 2, Due: 6}},
		},
		{
			name:     "inspect",
			response: `{"id":"1-2","state":"pending","topic":"t","queue":1,"key":"k","due":10,"sent":5,"visible":0,"body_bytes":3,"properties":{"p":"q"}}`,
			call:     func(c *Client) (any, error) { return c.Inspect(ctx, "1-2") },
			method:   "GET", path: "/v1/messages/1-2",
			want: Info{ID: "1-2", State: StatePending, Topic: "t", Queue: 1, Key: "k", Due: 10, Sent: 5, BodyBytes: 3, Properties: map[string]string{"p": "q"}},
		},
		{
			name:     "inspect key with slash",
			response: `{"id":"1-2","state":"visible","topic":"t","key":"a/b","due":10,"sent":5,"visible":11}`,
			call:     func(c *Client) (any, error) { return c.InspectKey(ctx, "t", "a/b") },
			method:   "GET", path: "/v1/topics/t/keys/a%2Fb",
			want: Info{ID: "1-2", State: StateVisible, Topic: "t", Key: "a/b", Due: 10, Sent: 5, Visible: 11},
		},
		{
			name:     "cancel",
			response: `{"id":"1-2","state":"cancelled"}`,
			call:     func(c *Client) (any, error) { return nil, c.Cancel(ctx, "1-2") },
			method:   "DELETE", path: "/v1/messages/1-2",
		},
		{
			name:     "reschedule if due",
			response: `{"id":"1-2","due":99,"due_time":"x"}`,
			call:     func(c *Client) (any, error) { return c.Reschedule(ctx, "1-2", After(90*time.Minute), 10) },
			method:   "POST", path: "/v1/messages/1-2/reschedule",
			body: map[string]any{"delay": "1h30m0s", "if_due": float64(10)},
			want: Rescheduled{ID: "1-2", Due: 99, DueTime: "x"},
		},
		{
			name:     "create topic",
			response: `{"name":"t","queues":8,"fifo":true,"pending":0,"visible":0,"groups":[]}`,
			call:     func(c *Client) (any, error) { return c.CreateTopic(ctx, "t", TopicConfig{Queues: 8, FIFO: true}) },
			method:   "PUT", path: "/v1/topics/t",
			body: map[string]any{"queues": float64(8), "fifo": true},
			want: TopicInfo{Name: "t", Queues: 8, FIFO: true, Groups: []GroupInfo{}},
		},
		{
			name:     "topics",
			response: `{"topics":[{"name":"a","queues":4,"fifo":false,"pending":2,"visible":7,"groups":[]}]}`,
			call:     func(c *Client) (any, error) { return c.Topics(ctx) },
			method:   "GET", path: "/v1/topics",
			want: []TopicInfo{{Name: "a", Queues: 4, Pending: 2, Visible: 7, Groups: []GroupInfo{}}},
		},
		{
			name: "describe topic",
			response: `{"name":"a","queues":4,"fifo":false,"pending":2,"visible":7,"groups":[{"topic":"a","name":"g","max_attempts":16,` +
				`"backoff_base":"1s","backoff_max":"5m0s","backlog":3,"in_flight":1,"delivered":9,"acked":8,"redelivered":1,"dead_lettered":0,"dead_letter_topic":"%DLQ%g"}]}`,
			call:   func(c *Client) (any, error) { return c.DescribeTopic(ctx, "a") },
			method: "GET", path: "/v1/topics/a",
			want: TopicInfo{Name: "a", Queues: 4, Pending: 2, Visible: 7, Groups: []GroupInfo{{Topic: "a", Name: "g",
				Config:  GroupConfig{MaxAttempts: 16, BackoffBase: time.Second, BackoffMax: 5 * time.Minute},
				Backlog: 3, InFlight: 1, Delivered: 9, Acked: 8, Redelivered: 1, DeadLetterTopic: "%DLQ%g"}}},
		},
		{
			name:     "create group",
			response: `{"topic":"a","name":"g","max_attempts":3,"backoff_base":"2s","backoff_max":"1m0s"}`,
			call: func(c *Client) (any, error) {
				return c.CreateGroup(ctx, "a", "g", GroupConfig{MaxAttempts: 3, BackoffBase: 2 * time.Second, BackoffMax: time.Minute})
			},
			method: "PUT", path: "/v1/topics/a/groups/g",
			body: map[string]any{"max_attempts": float64(3), "backoff_base": "2s", "backoff_max": "1m0s"},
			want: GroupInfo{Topic: "a", Name: "g", Config: GroupConfig{MaxAttempts: 3, BackoffBase: 2 * time.Second, BackoffMax: time.Minute}},
		},
		{
			name:     "groups",
			response: `{"groups":[{"topic":"a","name":"g","max_attempts":16,"backoff_base":"1s","backoff_max":"5m0s","backlog":1}]}`,
			call:     func(c *Client) (any, error) { return c.Groups(ctx, "a") },
			method:   "GET", path: "/v1/topics/a/groups",
			want: []GroupInfo{{Topic: "a", Name: "g", Config: GroupConfig{MaxAttempts: 16, BackoffBase: time.Second, BackoffMax: 5 * time.Minute}, Backlog: 1}},
		},
		{
			name: "receive",
			response: `{"messages":[{"id":"1-2","receipt":"r1","attempt":2,"queue":1,"offset":7,"key":"k","tag":"t","group":"","body":"hi","body_base64":"aGk=","due":100,"visible":103},` +
				`{"id":"1-3","receipt":"r2","attempt":1,"queue":0,"offset":0,"body_base64":"/wA=","due":5,"visible":5}]}`,
			call: func(c *Client) (any, error) {
				return c.Receive(ctx, "orders", "billing", ReceiveOptions{Max: 10, Invisible: time.Minute, Wait: 20 * time.Second})
			},
			method: "POST", path: "/v1/topics/orders/groups/billing/receive",
			body: map[string]any{"max": float64(10), "invisible": "1m0s", "wait": "20s"},
			want: []Received{{ID: "1-2", Receipt: "r1", Attempt: 2, Queue: 1, Offset: 7, Key: "k", Tag: "t", Body: []byte("hi"), Due: 100, Visible: 103},
				{ID: "1-3", Receipt: "r2", Attempt: 1, Body: []byte{0xff, 0}, Due: 5, Visible: 5}},
		},
		{
			name: "receive with acks, text bodies",
			response: `{"messages":[{"id":"1-4","receipt":"r3","attempt":1,"queue":0,"offset":9,"key":"","tag":"","group":"",` +
				`"properties":{"p":"v"},"body":"{\"a\":\"\u00e9\"}","due":7,"visible":8}],"acked":2}`,
			call: func(c *Client) (any, error) {
				return c.Receive(ctx, "o", "b", ReceiveOptions{Ack: []string{"r1", "r2"}, BodyEncoding: BodyText})
			},
			method: "POST", path: "/v1/topics/o/groups/b/receive",
			body: map[string]any{"ack": []any{"r1", "r2"}, "body_encoding": "text"},
			want: []Received{{ID: "1-4", Receipt: "r3", Attempt: 1, Offset: 9, Properties: map[string]string{"p": "v"},
				Body: []byte(`{"a":"é"}`), Due: 7, Visible: 8}},
		},
		{
			name:     "receive nothing",
			response: `{"messages":[]}`,
			call:     func(c *Client) (any, error) { return c.Receive(ctx, "o", "b", ReceiveOptions{}) },
			method:   "POST", path: "/v1/topics/o/groups/b/receive",
			body: map[string]any{},
			want: []Received{},
		},
		{
			name:     "ack",
			response: `{"acked":2}`,
			call:     func(c *Client) (any, error) { return c.Ack(ctx, "o", "b", "r1", "r2") },
			method:   "POST", path: "/v1/topics/o/groups/b/ack",
			body: map[string]any{"receipts": []any{"r1", "r2"}},
			want: 2,
		},
		{
			name:     "nack",
			response: `{}`,
			call:     func(c *Client) (any, error) { return nil, c.Nack(ctx, "o", "b", "r1", 5*time.Second) },
			method:   "POST", path: "/v1/topics/o/groups/b/nack",
			body: map[string]any{"receipt": "r1", "delay": "5s"},
		},
		{
			name:     "nack default backoff",
			response: `{}`,
			call:     func(c *Client) (any, error) { return nil, c.Nack(ctx, "o", "b", "r1", 0) },
			method:   "POST", path: "/v1/topics/o/groups/b/nack",
			body: map[string]any{"receipt": "r1"},
		},
		{
			name:     "invisibility",
			response: `{}`,
			call:     func(c *Client) (any, error) { return nil, c.ChangeInvisibility(ctx, "o", "b", "r1", time.Minute) },
			method:   "POST", path: "/v1/topics/o/groups/b/invisibility",
			body: map[string]any{"receipt": "r1", "invisible": "1m0s"},
		},
		{
			name:     "redrive",
			response: `{"redriven":4}`,
			call:     func(c *Client) (any, error) { return c.Redrive(ctx, "o", "b", 100) },
			method:   "POST", path: "/v1/topics/o/groups/b/redrive",
			body: map[string]any{"max": float64(100)},
			want: 4,
		},
		{
			name:     "list pending",
			response: `{"items":[{"id":"1-2","state":"pending","topic":"t","queue":0,"key":"","tag":"","due":9,"due_time":"x","sent":1,"body_bytes":2,"fire_at":9}],"next_cursor":"c2","scanned":4,"read":1}`,
			call: func(c *Client) (any, error) {
				return c.ListPending(ctx, ListRequest{Topic: "t", KeyPrefix: "a b", DueTo: 50, Limit: 10, Cursor: "c1"})
			},
			method: "GET", path: "/v1/pending",
			want: MessagePage{Items: []ListedMessage{{ID: "1-2", State: StatePending, Topic: "t", Due: 9, DueTime: "x", Sent: 1, BodyBytes: 2, FireAt: 9}},
				NextCursor: ptr("c2"), Scanned: 4, Read: 1},
		},
		{
			name:     "resend dead",
			response: `{"action":"resend","count":2}`,
			call:     func(c *Client) (any, error) { return c.ResendDead(ctx, "o", "b", []string{"x", "y"}) },
			method:   "POST", path: "/v1/topics/o/groups/b/dead/resend",
			body: map[string]any{"ids": []any{"x", "y"}},
			want: 2,
		},
		{
			name:     "purge dead",
			response: `{"action":"purge","count":3}`,
			call:     func(c *Client) (any, error) { return c.PurgeDead(ctx, "o", "b") },
			method:   "POST", path: "/v1/topics/o/groups/b/dead/purge",
			want: 3,
		},
		{
			name:     "stats",
			response: `{"pending":3,"sent":10,"fired":7,"cancelled":0,"rescheduled":1,"lateness_count":7,"lateness_p50_ms":1,"lateness_p99_ms":null,"recovery_seconds":0.5,"clock_jumps":0}`,
			call:     func(c *Client) (any, error) { return c.Stats(ctx) },
			method:   "GET", path: "/v1/stats",
			want: Stats{Pending: 3, Sent: 10, Fired: 7, Rescheduled: 1, LatenessCount: 7, LatenessP50Ms: ptr(1.0), RecoverySeconds: 0.5},
		},
		{
			name:     "health",
			response: `{"status":"ok"}`,
			call:     func(c *Client) (any, error) { return nil, c.Health(ctx) },
			method:   "GET", path: "/healthz",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, ok(tc.response))
			got, err := tc.call(f.client(WithToken("s3cret")))
			if err != nil {
				t.Fatalf("call failed: %v", err)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("result\n got %#v\nwant %#v", got, tc.want)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tc.method || r.Path != tc.path {
				t.Errorf("request %s %s, want %s %s", r.Method, r.Path, tc.method, tc.path)
			}
			if r.Auth != "Bearer s3cret" {
				t.Errorf("Authorization %q, want the bearer token", r.Auth)
			}
			if tc.body != nil && !reflect.DeepEqual(r.Body, tc.body) {
				t.Errorf("request body\n got %#v\nwant %#v", r.Body, tc.body)
			}
			if tc.body == nil && r.Body != nil {
				t.Errorf("request body %#v, want none", r.Body)
			}
			if r.Body != nil && r.ContentType != "application/json" {
				t.Errorf("Content-Type %q with a body", r.ContentType)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
