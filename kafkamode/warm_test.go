package kafkamode

import (
	"fmt"
	"testing"
)

// TestWarmTopicOncePerTopicBounded: each topic is queued once; a topic
// that finds the queue full is queued with a later record; past
// maxWarmTopics nothing more is remembered or queued.
func TestWarmTopicOncePerTopicBounded(t *testing.T) {
	w := &Worker{}
	w.idx = newLoopIndex(&w.cfg, &w.stats)
	w.idx.warm = make(chan string, 2)
	w.idx.warmTopic("a")
	w.idx.warmTopic("a")
	w.idx.warmTopic("b")
	w.idx.warmTopic("c") // queue full: not remembered
	if len(w.idx.warm) != 2 || len(w.idx.warmed) != 2 {
		t.Fatalf("queued %d, remembered %d; want 2 and 2", len(w.idx.warm), len(w.idx.warmed))
	}
	if got := <-w.idx.warm + <-w.idx.warm; got != "ab" {
		t.Fatalf("queued %q, want a then b", got)
	}
	w.idx.warmTopic("c")
	if len(w.idx.warm) != 1 {
		t.Fatalf("c was not queued once the queue had room")
	}
	<-w.idx.warm
	for i := len(w.idx.warmed); i < maxWarmTopics; i++ {
		w.idx.warmed[fmt.Sprint("t", i)] = struct{}{}
	}
	w.idx.warmTopic("new")
	if len(w.idx.warm) != 0 || len(w.idx.warmed) != maxWarmTopics {
		t.Fatalf("past the bound: queued %d, remembered %d", len(w.idx.warm), len(w.idx.warmed))
	}
}
