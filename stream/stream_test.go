package stream

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// open starts an engine on an in-memory filesystem and a manual clock,
// with n messages of topic "t" visible.
func open(t *testing.T, n int) (*engine.Engine, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	eng, err := engine.Open(engine.Options{Dir: "/data", FS: vfs.NewMem(), Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if err := eng.CreateTopic("t", engine.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	reqs := make([]engine.SendRequest, n)
	for i := range reqs {
		reqs[i] = engine.SendRequest{Message: message.Message{Topic: "t", Body: []byte{byte(i)}}}
	}
	if n > 0 {
		if _, err := eng.SendBatch(context.Background(), reqs); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ts, err := eng.DescribeTopic("t")
		if err != nil {
			t.Fatal(err)
		}
		if ts.Visible >= uint64(n) {
			return eng, clk
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d visible", ts.Visible, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func receipts(got []engine.Received) []string {
	rs := make([]string, len(got))
	for i := range got {
		rs[i] = got[i].Receipt
	}
	return rs
}

func TestOptionsDefaultsAndLimits(t *testing.T) {
	o := Options{Topic: "t", Group: "g"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Max != engine.DefaultReceive || o.Window != DefaultWindow || o.Invisible != engine.DefaultInvisible {
		t.Errorf("defaults: %+v", o)
	}
	big := Options{Max: 1000}
	if err := big.Validate(); err != nil || big.Window != DefaultWindow {
		t.Errorf("max 1000: window %d, %v", big.Window, err)
	}
	for _, bad := range []Options{
		{Max: -1}, {Max: engine.MaxReceive + 1}, {Window: -1}, {Window: MaxWindow + 1},
		{Invisible: time.Microsecond}, {Invisible: engine.MaxInvisible + time.Second},
	} {
		if err := bad.Validate(); errs.CodeOf(err) != errs.InvalidArgument {
			t.Errorf("%+v: %v, want invalid_argument", bad, err)
		}
	}
}

// The window holds the leases: Next leases no more than it has room for,
// an ack makes room, and so does the end of a lease.
func TestWindowBoundsTheLeases(t *testing.T) {
	eng, clk := open(t, 50)
	st, err := Open(eng, Options{Topic: "t", Group: "g", Max: 4, Window: 10, Invisible: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var held [][]string
	total := 0
	for total < 10 {
		got, err := st.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 4 {
			t.Fatalf("a batch of %d, max 4", len(got))
		}
		total += len(got)
		held = append(held, receipts(got))
	}
	if total != 10 || st.Leased() != 10 {
		t.Fatalf("received %d, window holds %d; want 10 and 10", total, st.Leased())
	}
	g, _ := eng.Groups("t")
	if g[0].InFlight != 10 {
		t.Fatalf("in flight %d, want 10: the stream leased past its window", g[0].InFlight)
	}
	// A full window: Next waits (its context ends it, not a message).
	short, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		got, err := st.Next(short)
		if len(got) > 0 {
			err = errs.New(errs.Internal, "got %d messages with a full window", len(got))
		}
		done <- err
	}()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Next with a full window: %v, want context.Canceled", err)
	}
	// An ack of 4 makes room for 4.
	if n, err := st.Ack(ctx, held[0]); err != nil || n != 4 {
		t.Fatalf("ack: %d, %v", n, err)
	}
	got, err := st.Next(ctx)
	if err != nil || len(got) != 4 {
		t.Fatalf("after an ack of 4: %d messages, %v", len(got), err)
	}
	// The leases' end makes room too: all 10 in the window end at once.
	clk.Advance(time.Minute + time.Second)
	got, err = st.Next(ctx)
	if err != nil || len(got) == 0 {
		t.Fatalf("after the leases ended: %d messages, %v", len(got), err)
	}
	if st.Leased() > 10 {
		t.Fatalf("window holds %d, more than 10", st.Leased())
	}
}

// One lease serves several batches: the window's room is leased at once
// and handed out Max at a time.
func TestNextLeasesTheRoomAtOnce(t *testing.T) {
	eng, _ := open(t, 40)
	st, err := Open(eng, Options{Topic: "t", Group: "g", Max: 8, Window: 32})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Next(context.Background())
	if err != nil || len(got) != 8 {
		t.Fatalf("first batch: %d, %v", len(got), err)
	}
	if st.Ahead() != 24 || st.Leased() != 32 {
		t.Fatalf("ahead %d, leased %d; want 24 and 32", st.Ahead(), st.Leased())
	}
	g, _ := eng.Groups("t")
	if g[0].Delivered != 32 {
		t.Fatalf("delivered %d, want 32 (one lease of the whole room)", g[0].Delivered)
	}
}

func TestOpenChecksTheGroup(t *testing.T) {
	eng, _ := open(t, 0)
	if _, err := Open(eng, Options{Topic: "nope", Group: "g"}); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("unknown topic: %v, want not_found", err)
	}
	if _, err := Open(eng, Options{Topic: "t", Group: "bad/name"}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Errorf("bad group name: %v, want invalid_argument", err)
	}
	if _, err := Open(eng, Options{Topic: "t", Group: "g"}); err != nil {
		t.Errorf("new group: %v", err)
	}
	if _, err := Open(eng, Options{Topic: "t", Group: "g"}); err != nil {
		t.Errorf("existing group: %v", err)
	}
}

// AckLines answers every line in order; lines queued together are acked
// together, and when that fails each line is made on its own: the good
// ones before the bad one are acked, the bad one fails alone, and nothing
// after it is made.
func TestAckLinesOutcomesInOrder(t *testing.T) {
	eng, _ := open(t, 12)
	st, err := Open(eng, Options{Topic: "t", Group: "g", Max: 12, Window: 12})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Next(context.Background())
	if err != nil || len(got) != 12 {
		t.Fatalf("%d, %v", len(got), err)
	}
	rs := receipts(got)
	lines := make(chan []string, 8)
	lines <- rs[0:3]
	lines <- rs[3:6]
	lines <- []string{rs[6], "bm90LWEtcmVjZWlwdA"}
	lines <- rs[9:12]
	close(lines)
	type outcome struct {
		n   int
		err error
	}
	var outs []outcome
	st.AckLines(context.Background(), lines, func(n int, err error) bool {
		outs = append(outs, outcome{n, err})
		return err == nil
	})
	if len(outs) != 3 || outs[0].n != 3 || outs[1].n != 3 || outs[0].err != nil || outs[1].err != nil || outs[2].err == nil {
		t.Fatalf("outcomes %+v, want 3 acked, 3 acked, an error", outs)
	}
	g, _ := eng.Groups("t")
	if g[0].Acked != 6 {
		t.Fatalf("acked %d, want 6: the bad line's good receipt and the line after it stay unacked", g[0].Acked)
	}
	if st.Leased() != 6 {
		t.Fatalf("window holds %d, want 6", st.Leased())
	}
}

// What Next leased ahead and never returned goes back at Close: ready
// again at once, its attempt not counted.
func TestCloseReleasesWhatWasLeasedAhead(t *testing.T) {
	eng, _ := open(t, 10)
	st, err := Open(eng, Options{Topic: "t", Group: "g", Max: 2, Window: 10, Invisible: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Next(context.Background())
	if err != nil || len(got) != 2 || st.Ahead() != 8 {
		t.Fatalf("%d, ahead %d, %v", len(got), st.Ahead(), err)
	}
	st.Close()
	g, _ := eng.Groups("t")
	if g[0].InFlight != 2 || st.Leased() != 2 || st.Ahead() != 0 {
		t.Fatalf("in flight %d, window %d, ahead %d: want the 2 returned only", g[0].InFlight, st.Leased(), st.Ahead())
	}
	again, err := eng.Receive(context.Background(), engine.ReceiveRequest{Topic: "t", Group: "g", Max: 10})
	if err != nil || len(again) != 8 {
		t.Fatalf("after Close: %d, %v; want the 8 released", len(again), err)
	}
	for _, m := range again {
		if m.Attempt != 1 {
			t.Fatalf("a released message came back at attempt %d", m.Attempt)
		}
	}
}

// A lease made as the stream's context ends is released, not returned.
func TestNextAfterTheEndLeasesNothing(t *testing.T) {
	eng, _ := open(t, 5)
	st, err := Open(eng, Options{Topic: "t", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := st.Next(ctx); err != context.Canceled || len(got) != 0 {
		t.Fatalf("%d, %v", len(got), err)
	}
	if g, _ := eng.Groups("t"); g[0].Delivered != 0 {
		t.Fatalf("delivered %d after the end", g[0].Delivered)
	}
}

// Two lines naming the same receipt are not made together: the second
// fails as it would on its own, and the counts stay true.
func TestAckLinesSameReceiptTwice(t *testing.T) {
	eng, _ := open(t, 2)
	st, err := Open(eng, Options{Topic: "t", Group: "g", Max: 2, Window: 2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Next(context.Background())
	if err != nil || len(got) != 2 {
		t.Fatal(len(got), err)
	}
	lines := make(chan []string, 2)
	lines <- []string{got[0].Receipt}
	lines <- []string{got[0].Receipt}
	close(lines)
	sum, fails := 0, 0
	st.AckLines(context.Background(), lines, func(n int, err error) bool {
		sum += n
		if err != nil {
			fails++
		}
		return err == nil
	})
	if sum != 1 || fails != 1 {
		t.Fatalf("answers sum %d, failures %d: want 1 acked, the second line failed", sum, fails)
	}
}

// A Next waiting for room sees a virtual clock's advance end the window's
// leases (within its poll), rather than waiting the lease out in real time.
func TestNextSeesAnAdvanceEndTheLeases(t *testing.T) {
	eng, clk := open(t, 20)
	st, err := Open(eng, Options{Topic: "t", Group: "g", Max: 10, Window: 10, Invisible: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Next(context.Background()); err != nil || len(got) != 10 {
		t.Fatal(len(got), err)
	}
	done := make(chan int, 1)
	go func() {
		got, _ := st.Next(context.Background())
		done <- len(got)
	}()
	clk.Advance(2 * time.Minute)
	select {
	case n := <-done:
		if n == 0 {
			t.Fatal("nothing after the advance")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next still waits 10 s (real) after an advance ended every lease of its window")
	}
}
