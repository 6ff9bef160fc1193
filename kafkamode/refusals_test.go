package kafkamode

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRefusalsTakeHandsOver: the map take returns is the caller's alone;
// a promise that fails afterwards (a batch kgo drops at a stop) adds to
// another. Under -race, reading the taken map while a late add runs was
// a data race.
func TestRefusalsTakeHandsOver(t *testing.T) {
	var f refusals
	first := &kgo.Record{Topic: "a"}
	f.add(first, errors.New("refused"))
	got := f.take()
	late := make(chan struct{})
	go func() {
		defer close(late)
		for range 100 {
			f.add(&kgo.Record{Topic: "late"}, errors.New("after the end"))
		}
	}()
	n := 0
	for r := range got {
		if r != first {
			t.Fatalf("a record the transaction did not refuse: %v", r.Topic)
		}
		n++
	}
	<-late
	if n != 1 || len(got) != 1 {
		t.Fatalf("the taken map changed: %d entries", len(got))
	}
	if next := f.take(); len(next) != 100 {
		t.Fatalf("the late refusals: %d, want 100", len(next))
	}
}
