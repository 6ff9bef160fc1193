package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// A send finds an existing topic without the engine's lock (it takes the
// lock once, to apply its record), after creation and after recovery; the
// send's next step still refuses on a closed engine.
func TestTopicLookupTakesNoLock(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.e.CreateTopic("jobs", TopicConfig{Queues: 2}); err != nil {
		t.Fatal(err)
	}
	for _, phase := range []string{"created", "recovered"} {
		var top *topic
		runHoldingLock(t, h.e, phase+": the lookup of an existing topic", func() {
			var err error
			if top, err = h.e.cat.topicFor("jobs"); err != nil {
				t.Error(err)
			}
		})
		if top == nil || top.name != "jobs" || len(top.queues) != 2 {
			t.Errorf("%s: lookup found %+v", phase, top)
		}
		h.restart()
	}
	if h.e.cat.topic("other") != nil {
		t.Fatal("a topic never created is known")
	}
	e := h.e
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	h.e = nil
	_, err := e.Send(context.Background(), message.Message{Topic: "jobs", Body: []byte("x")}, message.When{})
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("Send to an existing topic on a closed engine: %v, want Unavailable", err)
	}
}

// Concurrent first sends to a new topic create it once, and every send
// lands in that one topic.
func TestConcurrentAutoCreateMakesOneTopic(t *testing.T) {
	h := newHarness(t, nil)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.e.Send(context.Background(), message.Message{Topic: "fresh", Body: []byte{byte(i)}}, message.When{})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Immediate messages become visible through the dispatch loop: wait
	// for all of them, then count the topics of that name.
	deadline := time.Now().Add(10 * time.Second)
	for {
		named, visible := countTopic(h.e, "fresh")
		if named == 1 && visible == n {
			return
		}
		if named > 1 || time.Now().After(deadline) {
			t.Fatalf("topics named fresh: %d, visible messages: %d; want 1 and %d", named, visible, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countTopic returns how many topics are called name and how many messages
// their queues hold.
func countTopic(e *Engine, name string) (named int, visible uint64) {
	for _, ti := range e.Topics() {
		if ti.Name == name {
			named++
			for _, l := range ti.Lengths {
				visible += l
			}
		}
	}
	return named, visible
}

// runHoldingLock runs f while the engine's lock is held and fails the test
// when f waits for that lock (it has not returned 10 s later).
func runHoldingLock(t *testing.T, e *Engine, what string, f func()) {
	t.Helper()
	e.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		e.mu.Unlock()
	case <-time.After(10 * time.Second):
		e.mu.Unlock()
		<-done
		t.Fatalf("%s waited for the engine's lock", what)
	}
}
