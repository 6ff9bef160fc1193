package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

// TestPlanGroupWindow checks the window placement that grouplateness
// relies on for its claim that the window's messages were far-future when
// sent and that a bucket is loaded inside the window.
func TestPlanGroupWindow(t *testing.T) {
	const w, la = 60_000, 30_000
	for now := int64(1_700_000_000_000); now < 1_700_000_000_000+2*w; now += 997 {
		p := planGroupWindow(now, time.Minute, time.Minute, 30*time.Second)
		limit := floorDiv(p.sendBy+la, w)*w + w // loaded limit when sending ends
		if p.t0 < limit {
			t.Fatalf("now %d: window starts at %d, before the loaded limit %d at the end of sending", now, p.t0, limit)
		}
		if load := p.boundary - w - la; load < p.sendBy+5000 {
			t.Fatalf("now %d: the window's first bucket loads at %d, less than 5 s after sending ends (%d)", now, load, p.sendBy)
		}
		if load := p.boundary - la; load <= p.t0 || load >= p.t0+w {
			t.Fatalf("now %d: the second bucket loads at %d, not inside the window [%d, %d)", now, load, p.t0, p.t0+w)
		}
		if p.boundary%w != 0 {
			t.Fatalf("now %d: boundary %d is not on the bucket grid", now, p.boundary)
		}
	}
}

// TestClassify checks what the drill counts as in doubt: answers and
// refused connections are not; a broken connection is.
func TestClassify(t *testing.T) {
	refusedErr := fmt.Errorf("post: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})
	cases := []struct {
		err  error
		want outcome
	}{
		{nil, answered},
		{&client.Error{StatusCode: 404, Code: "not_found"}, answered},
		{refusedErr, refused},
		{errors.New("read: connection reset by peer"), inDoubt},
		{fmt.Errorf("post: %w", syscall.ECONNRESET), inDoubt},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
