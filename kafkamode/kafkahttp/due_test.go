package kafkahttp

import (
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// TestDueNeverEarly: a delay with a fraction of a millisecond is rounded
// up, never down (an adversarial review saw "1999999us" due 1,999 ms after
// the send: 0.999 ms early); whole milliseconds are kept as given.
func TestDueNeverEarly(t *testing.T) {
	const now = 1_800_000_000_000
	for _, tc := range []struct {
		delay string
		want  int64
	}{
		{"1999999us", now + 2000},
		{"1ns", now + 1},
		{"0s", now},
		{"250ms", now + 250},
		{"1h", now + 3_600_000},
	} {
		got, err := dueOf(api.Delivery{Delay: tc.delay}, now)
		if err != nil || got != tc.want {
			t.Errorf("delay %s: due %d (%v), want %d", tc.delay, got, err, tc.want)
		}
	}
}
