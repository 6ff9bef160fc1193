package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestScheduleBookkeepingDoesNotCount: the two properties the runner adds
// to every firing (its schedule and fire time) do not count against the
// properties a schedule may define: a schedule may define as many as a
// sent message (128 by default), fires with all of them, and one more is
// refused with an error that counts what the schedule defined.
func TestScheduleBookkeepingDoesNotCount(t *testing.T) {
	g := newRig(t)
	props := func(n int) map[string]string {
		p := map[string]string{}
		for i := range n {
			p[fmt.Sprintf("p%03d", i)] = "v"
		}
		return p
	}
	if _, err := g.r.Create(Schedule{ID: "full", Topic: "p", Cron: "* * * * *", Properties: props(128)}); err != nil {
		t.Fatalf("a schedule with 128 properties: %v", err)
	}
	_, err := g.r.Create(Schedule{ID: "over", Topic: "p", Cron: "* * * * *", Properties: props(129)})
	if err == nil || !strings.Contains(err.Error(), "message has 129 properties; the limit (max-properties) is 128") {
		t.Fatalf("a schedule with 129 properties: %v", err)
	}
	g.advance(30 * time.Second) // the first fire time
	g.advance(time.Second)
	if got := g.visible("p"); len(got) != 1 {
		t.Fatalf("firings of the schedule with 128 properties: %d visible, want 1 (sent %d)", len(got), g.r.Stats().Sent.Load())
	}
}
