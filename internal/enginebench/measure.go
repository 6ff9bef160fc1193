package main

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// quantiles summarises samples (sorted in place) at p50, p99, p99.9 and max.
type quantiles struct {
	n                   int
	p50, p99, p999, max int64
	min                 int64
}

func summarize(xs []int64) quantiles {
	if len(xs) == 0 {
		return quantiles{}
	}
	slices.Sort(xs)
	at := func(q float64) int64 {
		i := int(q*float64(len(xs))+0.5) - 1
		return xs[max(0, min(i, len(xs)-1))]
	}
	return quantiles{n: len(xs), p50: at(0.50), p99: at(0.99), p999: at(0.999), max: xs[len(xs)-1], min: xs[0]}
}

// ms formats quantiles of millisecond samples.
func (q quantiles) ms() string {
	return fmt.Sprintf("%d / %d / %d / %d ms", q.p50, q.p99, q.p999, q.max)
}

// nsAsMs formats quantiles of nanosecond samples in milliseconds.
func (q quantiles) nsAsMs() string {
	f := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }
	return fmt.Sprintf("%s / %s / %s / %s ms", f(q.p50), f(q.p99), f(q.p999), f(q.max))
}

// diskUsage is the size of a data directory split by engine component.
type diskUsage struct {
	files     map[string]int   // component -> file count
	apparent  map[string]int64 // component -> sum of file sizes
	allocated map[string]int64 // component -> sum of allocated blocks
}

// component names the part of the engine a data-directory path belongs to.
func component(rel string) string {
	top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	switch top {
	case "log":
		return "commit log"
	case "timers":
		return "timer buckets"
	case "keys.idx":
		return "key index"
	case "queues":
		return "queue indexes"
	}
	return "other (checkpoint, incarnation)"
}

var components = []string{"commit log", "timer buckets", "key index", "queue indexes", "other (checkpoint, incarnation)"}

// walkDisk sums the files under dir: apparent size and allocated blocks.
func walkDisk(dir string) (diskUsage, error) {
	u := diskUsage{files: map[string]int{}, apparent: map[string]int64{}, allocated: map[string]int64{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		c := component(rel)
		u.files[c]++
		u.apparent[c] += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			u.allocated[c] += st.Blocks * 512
		}
		return nil
	})
	return u, err
}

func (u diskUsage) total() (apparent, allocated int64) {
	for _, c := range components {
		apparent += u.apparent[c]
		allocated += u.allocated[c]
	}
	return apparent, allocated
}

// rssSampler records the peak VmRSS seen between start and stop, sampling
// every interval (VmHWM covers the whole process life, this one phase).
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startRSSSampler(every time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{})}
	s.peak.Store(rssBytes())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				if r := rssBytes(); r > s.peak.Load() {
					s.peak.Store(r)
				}
			}
		}
	}()
	return s
}

func (s *rssSampler) finish() int64 {
	close(s.stop)
	s.wg.Wait()
	return s.peak.Load()
}

// parallel runs fn(0) .. fn(n-1) in n goroutines and returns the first
// error any of them returned.
func parallel(n int, fn func(i int) error) error {
	errc := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := fn(i); err != nil {
				errc <- err
			}
		}(i)
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}
