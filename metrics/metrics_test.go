package metrics

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

func openEngine(t *testing.T) *engine.Engine {
	t.Helper()
	o := engine.NewOptions("/data")
	o.FS = vfs.NewMem()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return eng
}

// scrape returns the samples of the text exposition, "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	data, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func TestScrapeFollowsTheEngine(t *testing.T) {
	eng := openEngine(t)
	srv := httptest.NewServer(Handler(eng))
	defer srv.Close()

	before := scrape(t, srv.URL)
	if before["hourglass_messages_sent_total"] != 0 || before["hourglass_lateness_seconds_count"] != 0 {
		t.Fatalf("fresh engine: sent %v, lateness count %v", before["hourglass_messages_sent_total"], before["hourglass_lateness_seconds_count"])
	}
	if _, ok := before["go_goroutines"]; !ok {
		t.Fatal("no Go runtime metrics")
	}

	sendReceiveAck(t, eng)

	m := scrape(t, srv.URL)
	for series, want := range map[string]float64{
		"hourglass_messages_sent_total":                            5,
		"hourglass_messages_fired_total":                           3,
		"hourglass_messages_cancelled_total":                       1,
		"hourglass_messages_pending":                               1,
		"hourglass_lateness_seconds_count":                         3,
		`hourglass_lateness_seconds_bucket{le="+Inf"}`:             3,
		`hourglass_topic_messages_sent_total{topic="t"}`:           5,
		`hourglass_topic_messages_pending{topic="t"}`:              1,
		`hourglass_topic_queue_entries{topic="t"}`:                 3,
		`hourglass_group_delivered_total{group="g",topic="t"}`:     3,
		`hourglass_group_acked_total{group="g",topic="t"}`:         2,
		`hourglass_group_in_flight{group="g",topic="t"}`:           1,
		`hourglass_group_backlog{group="g",topic="t"}`:             1,
		`hourglass_group_dead_lettered_total{group="g",topic="t"}`: 0,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if m["hourglass_fsync_seconds_count"] <= before["hourglass_fsync_seconds_count"] {
		t.Errorf("fsync count did not grow: %v -> %v", before["hourglass_fsync_seconds_count"], m["hourglass_fsync_seconds_count"])
	}
	checkLatenessBuckets(t, m)
}

// sendReceiveAck sends 5 messages to topic t (3 due now, one cancelled,
// one due in an hour), receives the 3 due ones for group g and acks two.
func sendReceiveAck(t *testing.T, eng *engine.Engine) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := eng.Send(ctx, message.Message{Topic: "t", Body: []byte("x")}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	far, err := eng.Send(ctx, message.Message{Topic: "t", Body: []byte("later")}, message.When{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Cancel(ctx, far.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Send(ctx, message.Message{Topic: "t"}, message.When{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// Receive the three due ones for group g and ack two.
	var got []engine.Received
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		r, err := eng.Receive(ctx, engine.ReceiveRequest{Topic: "t", Group: "g", Wait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r...)
	}
	if len(got) != 3 {
		t.Fatalf("received %d, want 3", len(got))
	}
	if err := eng.Ack(ctx, "t", "g", got[0].Receipt, got[1].Receipt); err != nil {
		t.Fatal(err)
	}
}

// checkLatenessBuckets checks that the lateness buckets are cumulative:
// non-decreasing in le order, the last finite one at most the count 3.
func checkLatenessBuckets(t *testing.T, m map[string]float64) {
	t.Helper()
	prev := -1.0
	for _, b := range engine.LatenessBounds {
		v, ok := m[`hourglass_lateness_seconds_bucket{le="`+strconv.FormatFloat(b, 'g', -1, 64)+`"}`]
		if !ok {
			t.Fatalf("no lateness bucket le=%v", b)
		}
		if v < prev {
			t.Fatalf("bucket le=%v has %v, below the previous %v", b, v, prev)
		}
		prev = v
	}
	if prev > 3 {
		t.Fatalf("last finite bucket %v exceeds the count 3", prev)
	}
}

func TestHistogramIsCumulative(t *testing.T) {
	h := engine.NewHistogram(1, 2, 5)
	for _, v := range []float64{0.5, 1.5, 1.7, 4, 9} {
		h.Observe(v)
	}
	desc := prometheus.NewDesc("x_seconds", "test", nil, nil)
	var pb dto.Metric
	if err := histogram(desc, h).Write(&pb); err != nil {
		t.Fatal(err)
	}
	hist := pb.GetHistogram()
	if hist.GetSampleCount() != 5 || hist.GetSampleSum() != 0.5+1.5+1.7+4+9 {
		t.Fatalf("count %d sum %v", hist.GetSampleCount(), hist.GetSampleSum())
	}
	want := map[float64]uint64{1: 1, 2: 3, 5: 4}
	if len(hist.GetBucket()) != len(want) {
		t.Fatalf("%d buckets, want %d", len(hist.GetBucket()), len(want))
	}
	for _, b := range hist.GetBucket() {
		if b.GetCumulativeCount() != want[b.GetUpperBound()] {
			t.Errorf("le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want[b.GetUpperBound()])
		}
	}
}
