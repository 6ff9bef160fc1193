package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// TestRescheduleToItsOwnTimeWhileItsBucketLoads: a reschedule to the due
// time a message already has (or back to one it had) leaves a bucket entry
// that matches the new time. If the loader scheduled that entry while the
// reschedule was being written, the timer the reschedule then adds would
// be a second one, and the message would fire twice. (Found by the kill -9
// test: two adjacent queue entries of one message, after two reschedules
// to the same time.)
func TestRescheduleToItsOwnTimeWhileItsBucketLoads(t *testing.T) {
	r := newRaceRig(t)
	id := r.send("twice?", 25*time.Second) // bucket [20 s, 30 s): not loaded yet
	due := r.events[0].due
	if err := r.e.checkpoint(); err != nil { // the entry is in its bucket file
		t.Fatal(err)
	}
	waitParked(r.e, r.clk)
	r.gate.arm() // hold the reschedule's log sync
	done := make(chan error, 1)
	go func() {
		_, err := r.e.Reschedule(context.Background(), id, message.When{At: due}, 0)
		done <- err
	}()
	select {
	case <-r.gate.reached:
	case err := <-done:
		t.Fatalf("the reschedule returned (%v) without syncing the log", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the reschedule never reached its log sync")
	}
	// A second change meanwhile is refused: two in flight could apply in
	// another order than the log's.
	if err := r.e.Cancel(context.Background(), id); errs.CodeOf(err) != errs.FailedPrecondition {
		t.Errorf("a cancel while a reschedule is being written: %v, want failed_precondition", err)
	}
	// Now the bucket loads, while the reschedule is being written.
	r.clk.Advance(16 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.e.mu.Lock()
		loaded := r.e.disp.loadedPast(due)
		r.e.mu.Unlock()
		if loaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket of %d was not loaded: %s", due, engineState(r.e))
		}
		r.e.life.kickLoop()
		time.Sleep(100 * time.Microsecond)
	}
	close(r.gate.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.events = append(r.events, event{kind: evResched, state: evAcked, id: id, due: due})
	r.check("after the due time", due+1)
}
