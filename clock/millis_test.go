package clock

import (
	"testing"
	"time"
)

// TestCeilUnixMilli: a time with a fraction of a millisecond becomes the
// next millisecond, never the one before it, on both sides of 1970; a whole
// millisecond stays itself.
func TestCeilUnixMilli(t *testing.T) {
	base := time.UnixMilli(1_800_000_000_000)
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{base, 1_800_000_000_000},
		{base.Add(200 * time.Microsecond), 1_800_000_000_001},
		{base.Add(time.Nanosecond), 1_800_000_000_001},
		{base.Add(999_999 * time.Nanosecond), 1_800_000_000_001},
		{base.Add(time.Millisecond), 1_800_000_000_001},
		{time.Unix(0, 0), 0},
		{time.Unix(0, -200_000), 0},    // -0.2 ms rounds up to 0
		{time.Unix(0, -1_200_000), -1}, // -1.2 ms rounds up to -1
	} {
		if got := CeilUnixMilli(c.t); got != c.want {
			t.Errorf("CeilUnixMilli(%s) = %d, want %d", c.t.UTC().Format(time.RFC3339Nano), got, c.want)
		}
	}
}

// TestCeilMillis: durations round up to whole milliseconds.
func TestCeilMillis(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0}, {time.Nanosecond, 1}, {1200 * time.Microsecond, 2}, {2 * time.Millisecond, 2},
		{-1200 * time.Microsecond, -1}, {30 * time.Second, 30000},
	} {
		if got := CeilMillis(c.d); got != c.want {
			t.Errorf("CeilMillis(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}
