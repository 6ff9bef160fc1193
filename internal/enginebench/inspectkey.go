package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

// inspectKeyFigures measures InspectKey over random keys of the pending
// scenario's n messages ("order-<i>"), warm and, with -drop-caches, with
// the page cache emptied first, beside the same-run baseline: the same
// number of 64-byte preads at random places of the commit log's files, a
// raw loop that no index can beat, since a lookup by key must at least
// read the message's record. Each phase draws its own random keys.
func inspectKeyFigures(r *report, c config, e *engine.Engine, dir string, n int) error {
	if c.inspectSamples <= 0 || n <= 0 {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "log", "*"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("inspect-by-key baseline: no commit log files under %s: %v", dir, err)
	}
	phases := []struct {
		name string
		cold bool
	}{{"warm", false}, {"page cache dropped", true}}
	for _, ph := range phases {
		if ph.cold && !c.dropCaches {
			continue
		}
		rng := rand.New(rand.NewPCG(uint64(len(ph.name)), 11))
		if ph.cold {
			if err := dropCaches(c); err != nil {
				return err
			}
		}
		eng, err := timeInspectKeys(e, rng, n, c.inspectSamples)
		if err != nil {
			return err
		}
		if ph.cold {
			if err := dropCaches(c); err != nil {
				return err
			}
		}
		raw, err := timeRawReads(files, rng, c.inspectSamples)
		if err != nil {
			return err
		}
		r.fig(fmt.Sprintf("InspectKey, %s, %d random keys of %s: p50 / p99 / p99.9 / max", ph.name, c.inspectSamples, humanInt(int64(n))), eng.nsAsMs())
		r.fig(fmt.Sprintf("baseline, %s: 64 B pread at a random place of the commit log: p50 / p99 / p99.9 / max", ph.name), raw.nsAsMs())
		if raw.p99 > 0 {
			r.fig(fmt.Sprintf("InspectKey p99 / baseline p99, %s", ph.name), fmt.Sprintf("%.2f", float64(eng.p99)/float64(raw.p99)))
		}
	}
	return nil
}

// timeInspectKeys times InspectKey of samples random keys among n; every
// one must be found pending (the scenario's messages are far-future).
func timeInspectKeys(e *engine.Engine, rng *rand.Rand, n, samples int) (quantiles, error) {
	lat := make([]int64, 0, samples)
	for range samples {
		key := "order-" + strconv.Itoa(rng.IntN(n))
		t0 := time.Now()
		in, err := e.InspectKey(pendingTopic, key)
		lat = append(lat, time.Since(t0).Nanoseconds())
		if err != nil {
			return quantiles{}, fmt.Errorf("InspectKey %s: %w", key, err)
		}
		if in.Key != key {
			return quantiles{}, fmt.Errorf("InspectKey %s answered key %q", key, in.Key)
		}
	}
	return summarize(lat), nil
}

// timeRawReads times samples 64-byte preads at random offsets of random
// files among files (chosen in proportion to their sizes).
func timeRawReads(files []string, rng *rand.Rand, samples int) (quantiles, error) {
	var fds []*os.File
	var sizes []int64
	var total int64
	defer func() {
		for _, f := range fds {
			f.Close()
		}
	}()
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return quantiles{}, err
		}
		st, err := f.Stat()
		if err != nil || st.Size() < 64 {
			f.Close()
			continue
		}
		fds, sizes, total = append(fds, f), append(sizes, st.Size()), total+st.Size()
	}
	if total == 0 {
		return quantiles{}, fmt.Errorf("the commit log's files are empty")
	}
	buf := make([]byte, 64)
	lat := make([]int64, 0, samples)
	for range samples {
		at := rng.Int64N(total)
		i := 0
		for at >= sizes[i] {
			at -= sizes[i]
			i++
		}
		at = min(at, sizes[i]-64)
		t0 := time.Now()
		if _, err := fds[i].ReadAt(buf, at); err != nil {
			return quantiles{}, err
		}
		lat = append(lat, time.Since(t0).Nanoseconds())
	}
	return summarize(lat), nil
}
