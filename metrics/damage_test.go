package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog/commitlogtest"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestDamageMetrics: 4 bytes overwritten in a message record of a sealed
// segment show in the metrics once the scrub has read it (a damaged
// segment and range, degraded, the scrub's bytes and last pass), and the
// set-aside record once a group met it.
func TestDamageMetrics(t *testing.T) {
	fs := vfs.NewMem()
	o := engine.NewOptions("/data")
	o.FS, o.SegmentBytes, o.ScrubRate = fs, 4096, 1<<40
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := eng.Send(context.Background(), message.Message{Topic: "t", Body: []byte("some body of a message")}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every message visible before the close: one still pending at the
	// close's checkpoint could be compacted forward (a moved copy), and
	// the damage would miss the copy that is read.
	for deadline := time.Now().Add(10 * time.Second); eng.Stats().Fired.Load() < 100 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err = commitlogtest.DamageSealed(fs, "/data/log", 1, 5, 30, []byte{1, 2, 3, 4})
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}

	eng, err = engine.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv := httptest.NewServer(Handler(eng))
	defer srv.Close()
	if m := scrape(t, srv.URL); m["hourglass_damaged_segments"] != 0 || m["hourglass_degraded"] != 0 || m["hourglass_scrub_passes_total"] != 0 {
		t.Fatalf("before the scrub: segments %v degraded %v passes %v", m["hourglass_damaged_segments"], m["hourglass_degraded"], m["hourglass_scrub_passes_total"])
	}
	if err := eng.ScrubNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := scrape(t, srv.URL)
	if m["hourglass_damaged_segments"] != 1 || m["hourglass_damaged_ranges"] != 1 || m["hourglass_degraded"] != 1 ||
		m["hourglass_scrub_passes_total"] != 1 || m["hourglass_scrub_bytes_total"] < 4096 || m["hourglass_scrub_last_pass_timestamp_seconds"] < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("after the scrub: %v", m)
	}
	losses := 0
	for got := 0; ; {
		rs, err := eng.Receive(context.Background(), engine.ReceiveRequest{Topic: "t", Group: "g", Max: 50, Invisible: time.Hour})
		if errors.Is(err, errs.ErrDataLoss) {
			losses++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			if got != 99 || losses != 1 {
				t.Fatalf("received %d, %d data_loss", got, losses)
			}
			break
		}
		got += len(rs)
	}
	if m := scrape(t, srv.URL); m["hourglass_damaged_records"] != 1 || m["hourglass_damaged_segments"] != 1 {
		t.Fatalf("after the group met it: records %v segments %v", m["hourglass_damaged_records"], m["hourglass_damaged_segments"])
	}
}
