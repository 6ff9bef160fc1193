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

// TestDSTThroughTheBroker: the daylight-saving rules of package schedule,
// seen end to end on the virtual clock, on Europe/Berlin's changes of 2027
// (the 2026 ones are in the past of a broker started today, and its clock
// never runs backwards): a daily 02:30 fires at 03:00 CEST on 28 March,
// and once, at the first 02:30, on 31 October.
func TestDSTThroughTheBroker(t *testing.T) {
	srv := NewServer(t)
	ctx := context.Background()
	to := func(s string) {
		t.Helper()
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		srv.Advance(at.Sub(srv.Now()))
	}
	to("2027-03-27T12:00:00Z")
	if _, err := srv.Client.CreateSchedule(ctx, "night", client.ScheduleConfig{Topic: "night", Cron: "30 2 * * *", TZ: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	to("2027-03-28T12:00:00Z")
	to("2027-03-29T12:00:00Z")
	to("2027-10-30T12:00:00Z")
	to("2027-10-31T12:00:00Z")
	fires := map[string]bool{}
	for {
		msgs, err := srv.Client.Receive(ctx, "night", "g", client.ReceiveOptions{Max: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			fires[m.Properties["hourglass-fire-time"]] = true
		}
	}
	for fire, want := range map[string]bool{
		"2027-03-28T01:00:00.000Z": true,  // 03:00 CEST: 02:30 did not exist
		"2027-03-29T00:30:00.000Z": true,  // 02:30 CEST
		"2027-10-31T00:30:00.000Z": true,  // the first 02:30 (CEST)
		"2027-10-31T01:30:00.000Z": false, // the second 02:30 (CET): not again
		"2027-10-30T00:30:00.000Z": true,
	} {
		if fires[fire] != want {
			t.Errorf("fire at %s: %v, want %v", fire, fires[fire], want)
		}
	}
	// 28 March to 31 October inclusive, one a day.
	if len(fires) != 218 {
		t.Errorf("%d firings, want 218 (one a day)", len(fires))
	}
}

// TestLongPollAcrossAdvance: a receive long-polling when the clock is
// advanced past a message's due time gets that message, not an empty
// answer because its own wait ended with the advance.
func TestLongPollAcrossAdvance(t *testing.T) {
	srv := NewServer(t)
	ctx := context.Background()
	r, err := srv.Client.Send(ctx, "orders", client.Message{Body: []byte("close order 1"), When: client.After(30 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []client.Received, 1)
	errc := make(chan error, 1)
	go func() {
		ms, err := srv.Client.Receive(ctx, "orders", "closer", client.ReceiveOptions{Max: 1, Wait: 20 * time.Second})
		got <- ms
		errc <- err
	}()
	// Advance once the receive is in: it creates its group before it
	// waits. This only orders the receive before the advance (the case
	// that failed); the assertion below does not depend on it.
	for deadline := time.Now().Add(10 * time.Second); !hasGroup(t, srv, "orders", "closer"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the receive did not create its group within 10 s")
		}
	}
	srv.Advance(30 * time.Minute)
	select {
	case ms := <-got:
		if err := <-errc; err != nil || len(ms) != 1 || ms[0].ID != r.ID {
			t.Fatalf("the long poll open across the advance got %+v (%v), want the message", ms, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not answer within 15 s of the advance")
	}
}

// hasGroup reports whether topic has the consumer group group.
func hasGroup(t *testing.T, srv *Server, topic, group string) bool {
	t.Helper()
	gs, err := srv.Client.Groups(context.Background(), topic)
	if err != nil {
		t.Fatalf("groups of %s: %v", topic, err)
	}
	for _, g := range gs {
		if g.Name == group {
			return true
		}
	}
	return false
}
