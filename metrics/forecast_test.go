package metrics

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// TestDueNextAndDiskBytes: the due_next windows count what falls due
// within them (a cancelled message not at all), and the log's size shows.
func TestDueNextAndDiskBytes(t *testing.T) {
	eng := openEngine(t)
	srv := httptest.NewServer(Handler(eng))
	defer srv.Close()
	ctx := context.Background()
	for _, d := range []time.Duration{30 * time.Second, 10 * time.Minute, 10 * time.Minute, 3 * time.Hour, 48 * time.Hour} {
		if _, err := eng.Send(ctx, message.Message{Topic: "t", Body: []byte("x")}, message.When{Delay: d}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := eng.Send(ctx, message.Message{Topic: "t"}, message.When{Delay: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Cancel(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	m := scrape(t, srv.URL)
	for series, want := range map[string]float64{
		`hourglass_due_next{window="1m"}`:  1,
		`hourglass_due_next{window="1h"}`:  3,
		`hourglass_due_next{window="24h"}`: 4,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if m[`hourglass_disk_bytes{part="log"}`] <= 0 {
		t.Errorf("log bytes %v", m[`hourglass_disk_bytes{part="log"}`])
	}
	if _, ok := m[`hourglass_disk_bytes{part="timers"}`]; !ok {
		t.Error("no timers part")
	}
}
