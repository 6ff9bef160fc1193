package forecast

import (
	"math/rand/v2"
	"testing"
	"time"
)

// model is the obvious implementation Counts must agree with.
type model map[int64]int64

func (m model) sum(a, b int64) int64 {
	var n int64
	for s, v := range m {
		if s >= a && s < b {
			n += v
		}
	}
	return n
}

// TestCountsMatchModel adds and removes messages at random seconds (dense
// minutes, sparse minutes, across hour and day boundaries) and checks sums
// of random ranges against the model, including ranges that start or end
// anywhere within a minute, an hour or a day.
func TestCountsMatchModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c, m := New(), model{}
	base := int64(1_800_000_000) // a Unix second
	span := int64(5 * day)
	for i := 0; i < 20000; i++ {
		sec := base + rng.Int64N(span)
		if rng.IntN(3) == 0 {
			sec = base + rng.Int64N(200) // a dense region
		}
		if rng.IntN(4) == 0 && len(m) > 0 {
			// Take out one message at a second that has some.
			for s := range m {
				sec = s
				break
			}
			c.Add(sec, -1)
			if m[sec]--; m[sec] == 0 {
				delete(m, sec)
			}
		} else if rng.IntN(5) == 0 {
			// A minute at a time, as recovery counts.
			var n [60]int64
			mi := floorDiv(sec, minute)
			for k := rng.IntN(3) + 1; k > 0; k-- {
				s := rng.Int64N(60)
				n[s]++
				m[mi*minute+s]++
			}
			c.AddMinute(mi, &n)
		} else {
			c.Add(sec, 1)
			m[sec]++
		}
		if i%500 != 0 {
			continue
		}
		for k := 0; k < 50; k++ {
			a := base - 100 + rng.Int64N(span+200)
			b := a + rng.Int64N(span)
			if got, want := c.Sum(a, b), m.sum(a, b); got != want {
				t.Fatalf("after %d updates: Sum(%d, %d) = %d, want %d", i, a, b, got, want)
			}
		}
	}
	var total int64
	for _, v := range m {
		total += v
	}
	if c.Total() != total || c.SumAll(base+span+1) != total {
		t.Fatalf("Total %d, SumAll %d, want %d", c.Total(), c.SumAll(base+span+1), total)
	}
}

// TestCountsEmptyAgain checks that taking every message out leaves no
// minute, hour or day behind: memory follows the non-empty buckets.
func TestCountsEmptyAgain(t *testing.T) {
	c := New()
	secs := []int64{0, 1, 59, 60, 3599, 3600, 86399, 86400, 1_800_000_000}
	for _, s := range secs {
		c.Add(s, 3)
	}
	if c.Minutes() != 7 {
		t.Fatalf("minutes %d, want 7", c.Minutes())
	}
	for _, s := range secs {
		c.Add(s, -3)
	}
	if c.Total() != 0 || len(c.minutes) != 0 || len(c.hours) != 0 || len(c.days) != 0 {
		t.Fatalf("left: total %d, %d minutes, %d hours, %d days", c.Total(), len(c.minutes), len(c.hours), len(c.days))
	}
}

// TestCountsClampUnknown: taking out what was never added changes nothing.
func TestCountsClampUnknown(t *testing.T) {
	c := New()
	c.Add(100, 2)
	c.Add(101, -1) // same minute, another second, single-second page
	c.Add(500, -1) // another minute
	if c.Total() != 2 || c.Sum(0, 1000) != 2 {
		t.Fatalf("total %d, sum %d, want 2", c.Total(), c.Sum(0, 1000))
	}
	c.Add(101, 1)
	c.Add(102, -5) // dense page, second with nothing
	if c.Total() != 3 || c.Sum(100, 101) != 2 || c.Sum(101, 102) != 1 {
		t.Fatalf("total %d, [100,101) %d, [101,102) %d", c.Total(), c.Sum(100, 101), c.Sum(101, 102))
	}
}

func TestParseStep(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
		"30s": 30 * time.Second, "5m": 5 * time.Minute, "2d": 48 * time.Hour, "99999s": 99999 * time.Second,
	} {
		if got, err := ParseStep(in); err != nil || got != want {
			t.Errorf("ParseStep(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0s", "500ms", "1.5s", "-1m", "week", "1x", "0d", "d1", "1h30m", "100000s", "05m", "Minute"} {
		if _, err := ParseStep(bad); err == nil {
			t.Errorf("ParseStep(%q) accepted", bad)
		}
	}
}

func TestNewPlan(t *testing.T) {
	p, err := NewPlan(1_000_500, 1_180_001, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// [1000 s, 1181 s): three buckets, the last cut at to.
	if p.From != 1000 || p.To != 1181 || p.N != 4 {
		t.Fatalf("plan %+v", p)
	}
	c := New()
	c.Add(1000, 1)
	c.Add(1059, 2)
	c.Add(1060, 4)
	c.Add(1180, 8)
	c.Add(1181, 16) // after to
	got := p.Run(c)
	want := []int64{3, 4, 0, 8}
	for i, b := range got {
		if b.Count != want[i] {
			t.Fatalf("bucket %d %+v, want count %d", i, b, want[i])
		}
	}
	if got[3].End != 1_181_000 {
		t.Fatalf("last bucket ends %d", got[3].End)
	}
	for _, bad := range []struct {
		from, to int64
		step     time.Duration
	}{
		{10, 10, time.Second},              // empty
		{20, 10, time.Second},              // backwards
		{-1, 10, time.Second},              // before the epoch
		{0, 10_001_000, time.Second},       // 10,001 buckets
		{0, 1 << 62, 24 * time.Hour},       // beyond 9999
		{0, 1000, 1500 * time.Millisecond}, // not whole seconds
	} {
		if _, err := NewPlan(bad.from, bad.to, bad.step); err == nil {
			t.Errorf("NewPlan(%d, %d, %v) accepted", bad.from, bad.to, bad.step)
		}
	}
}

// TestCountsWidenPages drives one second of a dense minute past the limit
// of each page type (255, 65,535, 2^32-1) and back, and checks every sum
// stays exact and the neighbouring seconds keep their counts across each
// widening.
func TestCountsWidenPages(t *testing.T) {
	c, m := New(), model{}
	base := int64(1_800_000_000) - 1_800_000_000%minute
	add := func(sec, d int64) {
		c.Add(sec, d)
		m[sec] += d
	}
	add(base+1, 7)
	add(base+2, 255) // a dense page of uint8, full at second 2
	steps := []int64{1, 65_535 - 256, 1, 1<<32 - 65_537, 1, 1 << 40}
	for i, d := range steps {
		add(base+2, d)
		for _, r := range [][2]int64{{base, base + 60}, {base + 2, base + 3}, {base + 1, base + 2}, {base + 3, base + 60}} {
			if got, want := c.Sum(r[0], r[1]), m.sum(r[0], r[1]); got != want {
				t.Fatalf("step %d: Sum(%d, %d) = %d, want %d", i, r[0], r[1], got, want)
			}
		}
	}
	if _, ok := c.minutes[base/minute].secs.(*secs[int64]); !ok {
		t.Fatalf("page is %T after 2^40 in one second, want *secs[int64]", c.minutes[base/minute].secs)
	}
	add(base+2, -m[base+2])
	if got := c.Sum(base, base+60); got != 7 || c.Total() != 7 {
		t.Fatalf("after taking second 2 out: sum %d, total %d, want 7", got, c.Total())
	}
}

// TestNarrowPage checks that a dense minute of small counts takes the
// narrowest page: the memory the package doc promises.
func TestNarrowPage(t *testing.T) {
	c := New()
	var n [60]int64
	for s := range n {
		n[s] = int64(s % 5)
	}
	c.AddMinute(30_000_000, &n)
	if _, ok := c.minutes[30_000_000].secs.(*secs[uint8]); !ok {
		t.Fatalf("page is %T, want *secs[uint8]", c.minutes[30_000_000].secs)
	}
}
