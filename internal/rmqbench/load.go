package main

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadStats is the machine's 1-minute load average seen during a phase:
// at its start and end, and the mean and max of samples every 2 s. All
// zero where /proc/loadavg cannot be read (not Linux).
type loadStats struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Mean  float64 `json:"mean"`
	Max   float64 `json:"max"`
}

// loadSampler samples /proc/loadavg until stop.
type loadSampler struct {
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	mu   sync.Mutex
	xs   []float64
}

// loadAvg1 is the 1-minute load average, or 0 when it cannot be read.
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(first, 64)
	return v
}

func startLoadSampler() *loadSampler {
	s := &loadSampler{done: make(chan struct{}), xs: []float64{loadAvg1()}}
	s.wg.Go(func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				v := loadAvg1()
				s.mu.Lock()
				s.xs = append(s.xs, v)
				s.mu.Unlock()
			}
		}
	})
	return s
}

// stop ends the sampling and summarises it, with one last sample. It may
// be called more than once.
func (s *loadSampler) stop() loadStats {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
	xs := append(s.xs, loadAvg1())
	ls := loadStats{Start: xs[0], End: xs[len(xs)-1]}
	var sum float64
	for _, v := range xs {
		sum += v
		ls.Max = max(ls.Max, v)
	}
	ls.Mean = sum / float64(len(xs))
	return ls
}
