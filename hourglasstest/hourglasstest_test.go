package hourglasstest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/client"
)

// TestNewServer: the broker runs on the virtual clock, advances move it
// by exactly what was asked, and Close removes its directory.
func TestNewServer(t *testing.T) {
	srv := NewServer(t)
	ctx := context.Background()
	ct, err := srv.Client.Clock(ctx)
	if err != nil || ct.Mode != api.ClockVirtual {
		t.Fatalf("clock %+v, %v; want the virtual clock", ct, err)
	}
	before := srv.Now()
	r, err := srv.Client.Send(ctx, "reminders", client.Message{Body: []byte("x"), When: client.After(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Advance(24 * time.Hour); got.Sub(before) < 24*time.Hour || got.Sub(before) > 24*time.Hour+time.Second {
		t.Fatalf("advance by 24h moved the clock from %v to %v", before, got)
	}
	info, err := srv.Client.Inspect(ctx, r.ID)
	if err != nil || info.State != client.StateVisible {
		t.Fatalf("after the advance the message is %+v (%v), want visible", info, err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory is still there after Close: %v", err)
	}
}

// TestScheduleOnVirtualTime: a schedule's firings follow the virtual
// clock: advancing 30 minutes over an every-10-minutes schedule makes
// three firings visible.
func TestScheduleOnVirtualTime(t *testing.T) {
	srv := NewServer(t)
	ctx := context.Background()
	if _, err := srv.Client.CreateSchedule(ctx, "poll", client.ScheduleConfig{Topic: "polls", Cron: "@every 10m", Body: []byte("poll")}); err != nil {
		t.Fatal(err)
	}
	srv.Advance(30 * time.Minute)
	msgs, err := srv.Client.Receive(ctx, "polls", "g", client.ReceiveOptions{Max: 10})
	if err != nil || len(msgs) != 3 {
		t.Fatalf("after 30m: %d firings (%v), want 3", len(msgs), err)
	}
}
