package client

import (
	"context"
	"testing"
	"time"
)

// TestAtRoundsUpToTheNextMillisecond: an absolute time with a fraction of
// a millisecond is sent as the next whole millisecond, in a send and in a
// reschedule. Cut down to its millisecond, it made the message due, and
// fired, up to 1 ms before the time asked for.
func TestAtRoundsUpToTheNextMillisecond(t *testing.T) {
	f := newFake(t, ok(`{"id":"x","topic":"t","queue":0,"due":0,"due_time":""}`))
	c := f.client()
	boundary := time.UnixMilli(1_800_000_000_000)
	at := boundary.Add(200 * time.Microsecond)
	if _, err := c.Send(context.Background(), "t", Message{Body: []byte("b"), When: AtTime(at)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reschedule(context.Background(), "x", AtTime(at), 0); err != nil {
		t.Fatal(err)
	}
	exact := boundary.Add(2 * time.Millisecond)
	if _, err := c.Send(context.Background(), "t", Message{Body: []byte("b"), When: AtTime(exact)}); err != nil {
		t.Fatal(err)
	}
	want := []float64{1_800_000_000_001, 1_800_000_000_001, 1_800_000_000_002}
	for i, r := range f.requests() {
		if got, _ := r.Body["at"].(float64); got != want[i] {
			t.Errorf("request %d (%s %s): at %v, want %v", i, r.Method, r.Path, r.Body["at"], want[i])
		}
	}
}
