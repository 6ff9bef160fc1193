package engine

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/vfs"
)

// BenchmarkForecast10M answers forecasts over 10 M pending messages due
// uniformly over 30 days in 4 topics. The counts are filled through the
// same forecastState.addLocked the send path calls (the commit log is
// not involved: what is measured is the query, whose cost must not depend
// on how the messages arrived). Each shape is measured twice: Forecast,
// and the baseline, a raw scan that buckets the same 10 M due times held
// in a slice in memory (a lower bound for any answer that visits every
// pending message, such as reading the timer buckets).
//
//	go test -run '^$' -bench Forecast10M -benchtime 10x -count 3 ./engine
func BenchmarkForecast10M(b *testing.B) {
	const n = 10_000_000
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	span := (30 * 24 * time.Hour).Milliseconds()
	rng := rand.New(rand.NewPCG(11, 12))
	dues := make([]int64, n)
	for i := range dues {
		dues[i] = start + rng.Int64N(span)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f := newForecastState()
	for i, d := range dues {
		f.addLocked(uint32(1+i%4), d, 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.Logf("10 M pending in 4 topics: %d non-empty minutes; the counts take %.1f MiB of heap",
		f.all.Minutes(), float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))
	e := &Engine{side: &sideIndexes{fc: f}}
	for _, c := range []struct {
		name     string
		from, to int64
		step     time.Duration
	}{
		{"hour-by-minute", start + 3600_000, start + 2*3600_000, time.Minute},
		{"day-by-hour", start, start + 24*3600_000, time.Hour},
		{"week-by-hour", start, start + 7*24*3600_000, time.Hour},
		{"30days-by-day", start, start + span, 24 * time.Hour},
		{"10000-by-second", start + 7000, start + 7000 + 10_000_000, time.Second},
	} {
		p, err := forecast.NewPlan(c.from, c.to, c.step)
		if err != nil {
			b.Fatal(err)
		}
		var want int64
		b.Run(c.name+"/forecast", func(b *testing.B) {
			for b.Loop() {
				bs, err := e.Forecast("", c.from, c.to, c.step)
				if err != nil {
					b.Fatal(err)
				}
				want = 0
				for _, x := range bs {
					want += x.Count
				}
			}
		})
		b.Run(c.name+"/scan", func(b *testing.B) {
			counts := make([]int64, p.N)
			for b.Loop() {
				clear(counts)
				lo, hi, step := p.From*1000, p.To*1000, p.Step*1000
				for _, d := range dues {
					if d >= lo && d < hi {
						counts[(d-lo)/step]++
					}
				}
			}
			var got int64
			for _, x := range counts {
				got += x
			}
			if got != want {
				b.Fatalf("scan counts %d, forecast %d", got, want)
			}
		})
	}
}

// BenchmarkRecount is what counting the forecast adds to recovery, per
// timer bucket entry: the recovery filter (validLocked) and the gathering
// by minute, on entries in bucket order as VerifyVisit hands them over.
// The reading and checking of the entries is recovery's anyway.
//
//	go test -run '^$' -bench Recount -count 3 ./engine
func BenchmarkRecount(b *testing.B) {
	opts := Options{Dir: "data", FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	e, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 1 << 20
	es := make([]timerstore.Entry, n)
	for i := range es {
		// 1,000 entries a minute, the minutes in order, as the bucket files are read.
		es[i] = timerstore.Entry{Due: start + int64(i/1000)*60_000 + rng.Int64N(60_000), Pos: uint64(i) + 1, Topic: 1, Kind: kindMessage}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	saved := e.side.fc
	defer func() { e.side.fc = saved }()
	r := &recovery{side: e.side, disp: e.disp, log: e.clog, ovl: e.ovl}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%n == 0 {
			r.startForecastLocked(&checkpointState{LogPos: 1 << 62, Frontier: 0})
		}
		r.countTimerLocked(es[i%n])
	}
	e.side.fc.finishRecount()
}
