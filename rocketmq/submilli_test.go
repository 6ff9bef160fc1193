package rocketmq_test

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// TestSubMillisecondDeliveryRoundsUp: the official client sends its
// delivery timestamp with nanoseconds. A time 0.2 ms past a millisecond
// boundary must become due at the next millisecond: cut down to its
// millisecond it was due, and fired, 0.2 ms before the time asked for
// (one message in about 25,000 arrived early that way).
func TestSubMillisecondDeliveryRoundsUp(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	p := newProducer(t, b, "precise")
	c := newConsumer(t, b, "closer", "precise", 2*time.Second)
	boundary := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	due := boundary.Add(200 * time.Microsecond)
	msg := &rmq.Message{Topic: "precise", Body: []byte("at a fraction of a millisecond")}
	msg.SetDelayTimestamp(due)
	rs, err := p.Send(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	want := boundary.Add(time.Millisecond)
	receiveUntil(t, c, 15*time.Second, 20*time.Second, true, func(mv *rmq.MessageView, at time.Time) bool {
		dt := mv.GetDeliveryTimestamp()
		if dt == nil || !dt.Equal(want) {
			t.Errorf("delivery timestamp %v for a time asked for at %s; want the next millisecond %s",
				dt, due.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano))
		}
		if at.Before(due) {
			t.Errorf("received %v before its delivery time", due.Sub(at))
		}
		return mv.GetMessageId() == rs[0].MessageID
	})
}
