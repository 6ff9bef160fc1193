package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/hourglass-mq/hourglass/api"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/message"
)

const t0 = 1_700_000_000_000 // Unix ms of the fake clock's start

func fakeClock() *clock.Fake { return clock.NewFake(time.UnixMilli(t0)) }

func TestSendInspectRescheduleCancel(t *testing.T) {
	clk := fakeClock()
	ts := newTestServer(t, withFakeClock(clk))

	var rc api.Receipt
	ts.call("POST", "/v1/topics/orders/messages", map[string]any{
		"key": "order-1", "tag": "close", "body": "hi", "delay": "30m", "properties": map[string]string{"a": "b"},
	}, http.StatusOK, &rc)
	if rc.Topic != "orders" || rc.Due != t0+30*60*1000 {
		t.Fatalf("receipt %+v: want topic orders, due %d", rc, t0+30*60*1000)
	}
	if due, err := time.Parse(time.RFC3339Nano, rc.DueTime); err != nil || api.MillisOf(due) != rc.Due {
		t.Fatalf("due_time %q does not match due %d (%v)", rc.DueTime, rc.Due, err)
	}
	if _, err := message.ParseID(rc.ID); err != nil {
		t.Fatalf("id %q: %v", rc.ID, err)
	}

	var info api.MessageInfo
	ts.call("GET", "/v1/messages/"+rc.ID, nil, http.StatusOK, &info)
	if info.State != "pending" || info.Key != "order-1" || info.Tag != "close" || info.BodyBytes != 2 ||
		info.Due != rc.Due || info.Sent != t0 || info.Properties["a"] != "b" || info.Queue != rc.Queue {
		t.Fatalf("inspect: %+v", info)
	}
	var byKey api.MessageInfo
	ts.call("GET", "/v1/topics/orders/keys/order-1", nil, http.StatusOK, &byKey)
	if byKey.ID != rc.ID {
		t.Fatalf("by key: id %s, want %s", byKey.ID, rc.ID)
	}

	// Compare-and-set on the due time.
	r := ts.do("POST", "/v1/messages/"+rc.ID+"/reschedule", map[string]any{"delay": "1h", "if_due": rc.Due + 1})
	ts.wantError(r, http.StatusConflict, "failed_precondition")
	var rs api.Rescheduled
	ts.call("POST", "/v1/messages/"+rc.ID+"/reschedule", map[string]any{"at": t0 + 3_600_000, "if_due": rc.Due}, http.StatusOK, &rs)
	if rs.ID != rc.ID || rs.Due != t0+3_600_000 || rs.DueTime != rs.Due.RFC3339() {
		t.Fatalf("reschedule: %+v", rs)
	}
	ts.call("GET", "/v1/messages/"+rc.ID, nil, http.StatusOK, &info)
	if info.Due != rs.Due || info.State != "pending" {
		t.Fatalf("after reschedule: %+v", info)
	}

	var c api.Cancelled
	ts.call("DELETE", "/v1/messages/"+rc.ID, nil, http.StatusOK, &c)
	if c.ID != rc.ID || c.State != "cancelled" {
		t.Fatalf("cancel: %+v", c)
	}
	ts.wantError(ts.do("DELETE", "/v1/messages/"+rc.ID, nil), http.StatusConflict, "failed_precondition")
	ts.wantError(ts.do("POST", "/v1/messages/"+rc.ID+"/reschedule", `{"delay":"1s"}`), http.StatusConflict, "failed_precondition")
	ts.call("GET", "/v1/messages/"+rc.ID, nil, http.StatusOK, &info)
	if info.State != "cancelled" {
		t.Fatalf("state after cancel: %s", info.State)
	}
}

// receiveAll receives once for group, waiting up to wait.
func (ts *testServer) receive(topic, group string, body map[string]any) []api.ReceivedMessage {
	ts.t.Helper()
	if body == nil {
		body = map[string]any{} // {}: the server refuses null for a body
	}
	var out api.ReceiveResponse
	ts.call("POST", "/v1/topics/"+topic+"/groups/"+group+"/receive", body, http.StatusOK, &out)
	return out.Messages
}

// receiveUntil receives (and acks) until a message with id arrives,
// returning every message seen on the way.
func (ts *testServer) receiveUntil(topic, group, id string, within time.Duration) []api.ReceivedMessage {
	ts.t.Helper()
	var seen []api.ReceivedMessage
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		got := ts.receive(topic, group, map[string]any{"wait": "200ms", "max": 100})
		var receipts []string
		found := false
		for _, m := range got {
			seen = append(seen, m)
			receipts = append(receipts, m.Receipt)
			found = found || m.ID == id
		}
		if len(receipts) > 0 {
			ts.call("POST", "/v1/topics/"+topic+"/groups/"+group+"/ack", map[string]any{"receipts": receipts}, http.StatusOK, nil)
		}
		if found {
			return seen
		}
	}
	ts.t.Fatalf("message %s not received within %v", id, within)
	return nil
}

// TestDelayedDeliveryNeverEarly drives the broker clock by hand: a message
// due in 10 s is not handed out at 9.999 s, even after a message sent then
// (a barrier proving the dispatcher has caught up) was received, and is
// handed out once the clock reaches its due time.
func TestDelayedDeliveryNeverEarly(t *testing.T) {
	clk := fakeClock()
	ts := newTestServer(t, withFakeClock(clk))
	var late, marker api.Receipt
	ts.call("POST", "/v1/topics/jobs/messages", map[string]any{"body": "late", "delay": "10s"}, http.StatusOK, &late)
	clk.Advance(9999 * time.Millisecond)
	ts.call("POST", "/v1/topics/jobs/messages", map[string]any{"body": "marker"}, http.StatusOK, &marker)
	for _, m := range ts.receiveUntil("jobs", "g", marker.ID, 10*time.Second) {
		if m.ID == late.ID {
			t.Fatalf("message due at %d delivered at broker time %d", late.Due, t0+9999)
		}
	}
	clk.Advance(time.Millisecond)
	seen := ts.receiveUntil("jobs", "g", late.ID, 10*time.Second)
	m := seen[len(seen)-1]
	if m.Body == nil || *m.Body != "late" || m.Due != late.Due || m.Visible < late.Due || m.Attempt != 1 {
		t.Fatalf("received %+v", m)
	}
}

func TestGroupLeaseNackDeadLetterRedrive(t *testing.T) {
	clk := fakeClock()
	ts := newTestServer(t, withFakeClock(clk))
	ts.call("PUT", "/v1/topics/pay", `{"queues":2}`, http.StatusCreated, nil)
	var g api.Group
	ts.call("PUT", "/v1/topics/pay/groups/workers", map[string]any{"max_attempts": 2, "backoff_base": "1s", "backoff_max": "10s"}, http.StatusCreated, &g)
	if g.Topic != "pay" || g.Name != "workers" || g.MaxAttempts != 2 || g.BackoffBase != "1s" || g.BackoffMax != "10s" {
		t.Fatalf("group: %+v", g)
	}
	ts.wantError(ts.do("PUT", "/v1/topics/pay/groups/workers", nil), http.StatusConflict, "already_exists")

	var rc api.Receipt
	ts.call("POST", "/v1/topics/pay/messages", map[string]any{"body": "poll"}, http.StatusOK, &rc)
	var got []api.ReceivedMessage
	eventually(t, 10*time.Second, "first delivery", func() bool {
		got = ts.receive("pay", "workers", map[string]any{"invisible": "5s"})
		return len(got) > 0
	})
	if len(got) != 1 || got[0].ID != rc.ID || got[0].Attempt != 1 || got[0].Receipt == "" {
		t.Fatalf("first delivery: %+v", got)
	}
	first := got[0]

	ts.wantError(ts.do("POST", "/v1/topics/pay/groups/workers/ack", `{"receipts":["nonsense"]}`), http.StatusBadRequest, "invalid_argument")
	ts.call("POST", "/v1/topics/pay/groups/workers/invisibility", map[string]any{"receipt": first.Receipt, "invisible": "1m"}, http.StatusOK, nil)
	ts.call("POST", "/v1/topics/pay/groups/workers/nack", map[string]any{"receipt": first.Receipt, "delay": "2s"}, http.StatusOK, nil)
	// The nack ended the lease: its receipt is no longer known.
	ts.wantError(ts.do("POST", "/v1/topics/pay/groups/workers/ack", map[string]any{"receipts": []string{first.Receipt}}), http.StatusNotFound, "not_found")
	if again := ts.receive("pay", "workers", nil); len(again) != 0 {
		t.Fatalf("redelivered before the nack delay: %+v", again)
	}
	clk.Advance(2 * time.Second)
	eventually(t, 10*time.Second, "redelivery", func() bool {
		got = ts.receive("pay", "workers", nil)
		return len(got) > 0
	})
	if got[0].ID != rc.ID || got[0].Attempt != 2 || got[0].Receipt == first.Receipt {
		t.Fatalf("redelivery: %+v", got[0])
	}
	// The second failure reaches max_attempts: dead-lettered.
	ts.call("POST", "/v1/topics/pay/groups/workers/nack", map[string]any{"receipt": got[0].Receipt}, http.StatusOK, nil)
	var gl api.GroupList
	eventually(t, 10*time.Second, "dead-lettering", func() bool {
		ts.call("GET", "/v1/topics/pay/groups", nil, http.StatusOK, &gl)
		return len(gl.Groups) == 1 && gl.Groups[0].DeadLettered == 1
	})
	if gl.Groups[0].DeadLetterTopic == "" || gl.Groups[0].Delivered != 2 || gl.Groups[0].Redelivered != 1 {
		t.Fatalf("group after dead-lettering: %+v", gl.Groups[0])
	}

	// A redrive moves the dead letters visible so far: wait for its fire.
	eventually(t, 10*time.Second, "the dead letter visible", func() bool {
		var dt api.Topic
		ts.call("GET", "/v1/topics/%25DLQ%25pay.workers", nil, http.StatusOK, &dt)
		return dt.Visible == 1
	})
	var rd api.RedriveResponse
	ts.call("POST", "/v1/topics/pay/groups/workers/redrive", nil, http.StatusOK, &rd)
	if rd.Redriven != 1 {
		t.Fatalf("redriven %d, want 1", rd.Redriven)
	}
	eventually(t, 10*time.Second, "redriven delivery", func() bool {
		got = ts.receive("pay", "workers", nil)
		return len(got) > 0
	})
	if got[0].Properties["hourglass-redriven-from"] == "" || *got[0].Body != "poll" || got[0].Attempt != 1 {
		t.Fatalf("redriven message: %+v", got[0])
	}
	var acked api.AckResponse
	ts.call("POST", "/v1/topics/pay/groups/workers/ack", map[string]any{"receipts": []string{got[0].Receipt, got[0].Receipt}}, http.StatusOK, &acked)
	if acked.Acked != 1 {
		t.Fatalf("acked %d, want 1 (duplicates count once)", acked.Acked)
	}
	var topic api.Topic
	ts.call("GET", "/v1/topics/pay", nil, http.StatusOK, &topic)
	if topic.Name != "pay" || topic.Queues != 2 || len(topic.Groups) != 1 || topic.Groups[0].Acked != 1 {
		t.Fatalf("topic: %+v", topic)
	}
	// The redrive's reader of the dead-letter topic is the broker's own:
	// no list, and no metric, shows it, and no client may use it.
	ts.call("GET", "/v1/topics/%25DLQ%25pay.workers/groups", nil, http.StatusOK, &gl)
	var dlq api.Topic
	ts.call("GET", "/v1/topics/%25DLQ%25pay.workers", nil, http.StatusOK, &dlq)
	if len(gl.Groups) != 0 || len(dlq.Groups) != 0 {
		t.Fatalf("the dead-letter topic lists groups %+v / %+v", gl.Groups, dlq.Groups)
	}
	if m := ts.do("GET", "/metrics", nil); m.status != http.StatusOK || strings.Contains(string(m.body), `group="redrive"`) {
		t.Fatalf("/metrics shows the redrive's reader: %d", m.status)
	}
	ts.wantError(ts.do("POST", "/v1/topics/%25DLQ%25pay.workers/groups/redrive/receive", nil), http.StatusBadRequest, "invalid_argument")
}

func TestFIFOGroupOrder(t *testing.T) {
	ts := newTestServer(t)
	ts.call("PUT", "/v1/topics/fifo", `{"fifo":true,"queues":2}`, http.StatusCreated, nil)
	ts.wantError(ts.do("POST", "/v1/topics/fifo/messages", `{"body":"x"}`), http.StatusBadRequest, "invalid_argument")
	var msgs []map[string]any
	for i := 0; i < 5; i++ {
		msgs = append(msgs, map[string]any{"group": "order-7", "body": fmt.Sprint(i)})
	}
	var br api.BatchReceipts
	ts.call("POST", "/v1/topics/fifo/batch", map[string]any{"messages": msgs}, http.StatusOK, &br)
	for i := 0; i < 5; i++ {
		var got []api.ReceivedMessage
		eventually(t, 10*time.Second, "next in order", func() bool {
			got = ts.receive("fifo", "c", map[string]any{"max": 10})
			return len(got) > 0
		})
		if len(got) != 1 || got[0].ID != br.Receipts[i].ID || *got[0].Body != fmt.Sprint(i) {
			t.Fatalf("step %d: got %+v, want only message %d", i, got, i)
		}
		ts.call("POST", "/v1/topics/fifo/groups/c/ack", map[string]any{"receipts": []string{got[0].Receipt}}, http.StatusOK, nil)
	}
}

func TestBinaryBodyAndKeyWithSlash(t *testing.T) {
	ts := newTestServer(t)
	raw := []byte{0xff, 0x00, 0xfe, 'a'}
	var rc api.Receipt
	ts.call("POST", "/v1/topics/bin/messages", map[string]any{"key": "a/b", "body_base64": base64.StdEncoding.EncodeToString(raw)}, http.StatusOK, &rc)
	var info api.MessageInfo
	ts.call("GET", "/v1/topics/bin/keys/a%2Fb", nil, http.StatusOK, &info)
	if info.ID != rc.ID || info.BodyBytes != len(raw) {
		t.Fatalf("by key a/b: %+v", info)
	}
	got := ts.receiveUntil("bin", "g", rc.ID, 10*time.Second)
	m := got[len(got)-1]
	if m.Body != nil || m.BodyBase64 != base64.StdEncoding.EncodeToString(raw) || m.Key != "a/b" {
		t.Fatalf("binary body: %+v", m)
	}
}

func TestLongPollWakesOnSend(t *testing.T) {
	ts := newTestServer(t)
	ts.call("PUT", "/v1/topics/lp", nil, http.StatusCreated, nil)
	done := make(chan []api.ReceivedMessage, 1)
	go func() {
		var out api.ReceiveResponse
		// Not ts.call: t.Fatal must not run outside the test goroutine.
		r := ts.doAsync("POST", "/v1/topics/lp/groups/g/receive", `{"wait":"20s"}`)
		json.Unmarshal(r.body, &out)
		done <- out.Messages
	}()
	waitGroupExists(t, ts, "lp", "g")
	var rc api.Receipt
	ts.call("POST", "/v1/topics/lp/messages", `{"body":"wake"}`, http.StatusOK, &rc)
	select {
	case got := <-done:
		if len(got) != 1 || got[0].ID != rc.ID {
			t.Fatalf("long poll returned %+v, want message %s", got, rc.ID)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long poll did not return after a send")
	}
}

func TestLongPollEndsOnDrain(t *testing.T) {
	ts := newTestServer(t)
	ts.call("PUT", "/v1/topics/lp", nil, http.StatusCreated, nil)
	done := make(chan response, 1)
	go func() { done <- ts.doAsync("POST", "/v1/topics/lp/groups/g/receive", `{"wait":"30s"}`) }()
	waitGroupExists(t, ts, "lp", "g")
	ts.h.Drain()
	select {
	case r := <-done:
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"messages":[],"acked":0}` {
			t.Fatalf("drained long poll: %d %s", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll did not end on Drain")
	}
}

func TestLongPollEndsOnClientDisconnect(t *testing.T) {
	ts := newTestServer(t)
	ts.call("PUT", "/v1/topics/lp", nil, http.StatusCreated, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.srv.URL+"/v1/topics/lp/groups/g/receive", strings.NewReader(`{"wait":"30s"}`))
		if resp, err := ts.srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitGroupExists(t, ts, "lp", "g")
	cancel()
	// Close waits for every handler to return: it returns promptly only
	// if the receive noticed the disconnect.
	closed := make(chan struct{})
	go func() { ts.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the receive handler kept waiting after the client disconnected")
	}
}

// doAsync is do for a goroutine other than the test's: it reports
// transport errors as status 0 instead of failing the test.
func (ts *testServer) doAsync(method, path, body string) response {
	req, err := http.NewRequest(method, ts.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return response{}
	}
	resp, err := ts.srv.Client().Do(req)
	if err != nil {
		return response{}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func waitGroupExists(t *testing.T, ts *testServer, topic, group string) {
	t.Helper()
	eventually(t, 10*time.Second, "group "+group+" to exist", func() bool {
		var gl api.GroupList
		ts.call("GET", "/v1/topics/"+topic+"/groups", nil, http.StatusOK, &gl)
		return len(gl.Groups) == 1 && gl.Groups[0].Name == group
	})
}

func TestStatsAndTopics(t *testing.T) {
	ts := newTestServer(t)
	for i := 0; i < 3; i++ {
		ts.call("POST", "/v1/topics/a/messages", `{"body":"x","delay":"1h"}`, http.StatusOK, nil)
	}
	ts.call("POST", "/v1/topics/b/batch", `{"messages":[{"body":"1"},{"body":"2","level":1}]}`, http.StatusOK, nil)
	var st api.Stats
	ts.call("GET", "/v1/stats", nil, http.StatusOK, &st)
	if st.Sent != 5 || st.Pending < 3 {
		t.Fatalf("stats: %+v", st)
	}
	var tl api.TopicList
	ts.call("GET", "/v1/topics", nil, http.StatusOK, &tl)
	if len(tl.Topics) != 2 || tl.Topics[0].Name != "a" || tl.Topics[1].Name != "b" || tl.Topics[0].Pending != 3 || tl.Topics[0].Queues != 4 {
		t.Fatalf("topics: %+v", tl)
	}
	var h map[string]string
	ts.call("GET", "/healthz", nil, http.StatusOK, &h)
	if h["status"] != "ok" {
		t.Fatalf("healthz: %v", h)
	}
}
