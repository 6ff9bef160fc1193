package kafkamode_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/kafkamode"
	"github.com/hourglass-mq/hourglass/kafkamode/kafkahttp"
)

// TestKafkaHTTPAPI: the worker's HTTP API (hourglass kafka --listen) and
// the unchanged client and CLI against it. Sends over HTTP are delivered
// to a read_committed consumer, none early; inspect says pending, then
// visible with the forward's time; cancel by ID and by key and a
// reschedule keep the cancelled ones from ever arriving (settle proves
// it); the forecast counts what the worker indexed.
func TestKafkaHTTPAPI(t *testing.T) {
	e := newEnv(t, 3)
	e.copies = true // a reschedule copies its record forward (settleReschedule)
	c := e.collect(e.biz)
	addr := freeAddr(t)
	e.startWorker("w1", "--listen", addr)
	cl := client.New("http://"+addr, client.WithToken(""))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	waitUp(t, ctx, cl)

	l := &ledger{due: map[string]int64{}}
	send := func(key, body string, delay time.Duration) client.Receipt {
		t.Helper()
		r, err := cl.Send(ctx, e.biz, client.Message{Key: key, Body: []byte(body), When: client.When{Delay: delay},
			Properties: map[string]string{"trace": body}})
		if err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		if !strings.HasPrefix(r.ID, "k:") || r.Topic != e.biz || r.Due.Time().Before(time.Now().Add(delay-time.Second)) {
			t.Fatalf("receipt %+v", r)
		}
		return r
	}
	m1 := send("order-1", "m1", 4*time.Second)
	m2 := send("order-2", "m2", 4*time.Second)
	m3 := send("order-3", "m3", 30*time.Second)
	send("order-4", "m4", 5*time.Second)
	m5 := send("order-5", "m5", 60*time.Second)

	checkForecast(t, ctx, addr, m3)

	in, err := cl.Inspect(ctx, m1.ID)
	if err != nil || in.State != "pending" || in.Due != m1.Due || in.Topic != e.biz || in.Key != "order-1" || in.Properties["trace"] != "m1" {
		t.Fatalf("inspect m1: %+v %v; want pending, due %d", in, err, m1.Due)
	}
	if in, err := cl.InspectKey(ctx, e.biz, "order-3"); err != nil || in.ID != m3.ID {
		t.Fatalf("inspect by key order-3: %+v %v; want %s", in, err, m3.ID)
	}

	// Cancel m3 by ID, m4 by key; move m5 to 3 s from now.
	if err := cl.Cancel(ctx, m3.ID); err != nil {
		t.Fatalf("cancel m3: %v", err)
	}
	// The cancel answered once the worker applied it: inspect agrees.
	if in, err := cl.Inspect(ctx, m3.ID); err != nil || in.State != "cancelled" {
		t.Fatalf("inspect m3 right after its cancel: %+v %v; want cancelled", in, err)
	}
	checkCancelKey(t, ctx, cl, addr)
	moved, err := cl.Reschedule(ctx, m5.ID, client.When{Delay: 3 * time.Second}, 0)
	if err != nil || moved.ID == m5.ID {
		t.Fatalf("reschedule m5: %+v %v; want a new ID", moved, err)
	}
	// The reschedule answered once the original was cancelled: a second
	// one is refused rather than scheduling a second copy.
	if _, err := cl.Reschedule(ctx, m5.ID, client.When{Delay: 4 * time.Second}, 0); !client.IsFailedPrecondition(err) {
		t.Fatalf("second reschedule of m5: %v, want failed_precondition", err)
	}

	badID := produceBadHeaders(t, ctx, e)

	// The CLI's send, unchanged, against the worker.
	var m6 client.Receipt
	runCLI(t, ctx, &m6, "send", "--server", "http://"+addr, "--topic", e.biz, "--key", "order-6", "--delay", "2s", "--json", "m6")

	l.due["m1"], l.due["m2"], l.due["m5"], l.due["m6"] = int64(m1.Due), int64(m2.Due), int64(moved.Due), int64(m6.Due)
	got := e.settle(c, l, 60*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatalf("%s (an unknown ID is a cancelled message that was delivered)", v)
	}

	checkResolved(t, ctx, cl, addr, m1, []string{m3.ID, m5.ID}, badID)
}

// checkForecast waits until the worker's forecast counts the test's five
// messages, and checks the bucket of m3 and the CLI's forecast.
func checkForecast(t *testing.T, ctx context.Context, addr string, m3 client.Receipt) {
	t.Helper()
	// The forecast counts the five once the worker has read them.
	var f api.KafkaForecast
	for {
		f = forecastOf(t, ctx, addr)
		if f.Pending == 5 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("forecast pending %d, want 5", f.Pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if f.Total != 5 || len(f.Partitions) != 3 {
		t.Fatalf("forecast total %d over partitions %v, want 5 over all three", f.Total, f.Partitions)
	}
	for _, b := range f.Buckets {
		if m3.Due >= b.Start && m3.Due < b.End && b.Count != 1 {
			t.Fatalf("the bucket of m3's due time counts %d, want 1", b.Count)
		}
	}
	// The CLI's forecast, unchanged, against the worker.
	var cf api.Forecast
	runCLI(t, ctx, &cf, "forecast", "--server", "http://"+addr, "--step", "second", "--for", "2m", "--json")
	if cf.Total != 5 {
		t.Fatalf("hourglass forecast: total %d, want 5", cf.Total)
	}
}

// checkResolved checks, once everything settled, what inspect and cancel
// say of the delivered m1, the cancelled messages and the bad record.
func checkResolved(t *testing.T, ctx context.Context, cl *client.Client, addr string, m1 client.Receipt, cancelled []string, badID string) {
	t.Helper()
	in, err := cl.Inspect(ctx, m1.ID)
	if err != nil || in.State != "visible" || in.Visible < in.Due {
		t.Fatalf("inspect m1 after delivery: %+v %v; want visible, forwarded at or after its due time", in, err)
	}
	for _, id := range cancelled {
		if in, err := cl.Inspect(ctx, id); err != nil || in.State != "cancelled" {
			t.Fatalf("inspect %s after settle: %+v %v; want cancelled", id, in, err)
		}
	}
	in, err = cl.Inspect(ctx, badID)
	if err != nil || in.State != "dead_lettered" {
		t.Fatalf("inspect the bad record: %+v %v; want dead_lettered", in, err)
	}
	var raw api.KafkaMessageInfo
	getJSON(t, ctx, "http://"+addr+"/v1/messages/"+badID, &raw)
	if !strings.Contains(raw.Reason, "_delayMs") {
		t.Fatalf("dead-letter reason %q does not name the bad header", raw.Reason)
	}
	if err := cl.Cancel(ctx, m1.ID); !client.IsFailedPrecondition(err) {
		t.Fatalf("cancel of a delivered message: %v, want failed_precondition", err)
	}
	if _, err := cl.Inspect(ctx, "k:0:999999"); !client.IsNotFound(err) {
		t.Fatalf("inspect past the end: %v, want not_found", err)
	}
}

// produceBadHeaders produces, with a Kafka client, a record with a bad
// control header (inspect must say it is dead-lettered and why) and
// returns its ID.
func produceBadHeaders(t *testing.T, ctx context.Context, e *env) string {
	t.Helper()
	bad := &kgo.Record{Topic: e.delay, Key: []byte("bad"), Value: []byte("bad"),
		Headers: []kgo.RecordHeader{{Key: kafkamode.HeaderDelayMs, Value: []byte("soon")}}}
	if err := e.cl.ProduceSync(ctx, bad).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return kafkahttp.FormatID(bad.Partition, bad.Offset)
}

// waitUp waits until the worker's API answers /healthz.
func waitUp(t *testing.T, ctx context.Context, cl *client.Client) {
	t.Helper()
	for cl.Health(ctx) != nil {
		if ctx.Err() != nil {
			t.Fatal("the worker's HTTP API did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// forecastOf asks the worker's API for the next two minutes by the second.
func forecastOf(t *testing.T, ctx context.Context, addr string) api.KafkaForecast {
	t.Helper()
	var f api.KafkaForecast
	url := "http://" + addr + "/v1/forecast?step=second&to=" + strconv.FormatInt(time.Now().Add(2*time.Minute).UnixMilli(), 10)
	// A worker still starting (creating and checking its topics) has no
	// index to count yet: it answers 503 until its loop runs.
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	getJSON(t, ctx, url, &f)
	return f
}

// getJSON GETs url and decodes its 200 answer into out.
func getJSON(t *testing.T, ctx context.Context, url string, out any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
}

// runCLI runs the hourglass command with args and decodes its JSON output
// into out.
func runCLI(t *testing.T, ctx context.Context, out any, args ...string) {
	t.Helper()
	b, err := exec.CommandContext(ctx, binary(t), args...).Output()
	if err != nil {
		t.Fatalf("hourglass %v: %v\n%s", args, err, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("hourglass %v: %v\n%s", args, err, b)
	}
}

// checkCancelKey cancels order-4 by key through the CLI (one message
// matched), and a key nothing has through the client: not found, and no
// cancel record written.
func checkCancelKey(t *testing.T, ctx context.Context, cl *client.Client, addr string) {
	t.Helper()
	var kc api.KafkaCancel
	runCLI(t, ctx, &kc, "cancel", "--server", "http://"+addr, "--every-key", "order-4", "--json")
	if kc.Key != "order-4" || kc.State != api.StateCancelled || !strings.HasPrefix(kc.Control, "k:") || kc.Matched != 1 {
		t.Fatalf("cancel by key: %+v; want cancelled, matched 1", kc)
	}
	if r, err := cl.CancelKey(ctx, "order-none"); !client.IsNotFound(err) {
		t.Fatalf("cancel by a key nothing has: %+v %v, want not_found", r, err)
	}
}
