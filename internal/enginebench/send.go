package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// preloadSpec describes a bulk send: n messages to topic with keys
// "<keyPrefix><i>" and due times drawn by due.
type preloadSpec struct {
	topic     string
	keyPrefix string // "" sends without keys
	n         int
	batch     int
	senders   int
	body      []byte
	// due returns the due time (Unix ms) of message i; rng is the
	// sender's own generator.
	due func(i int, rng *rand.Rand) int64
}

// preloadResult is what a bulk send measured.
type preloadResult struct {
	took     time.Duration
	batchLat []int64 // ns per SendBatch call
}

// preload sends spec.n messages with spec.senders goroutines calling
// SendBatch, each on its own contiguous range of message numbers.
func preload(e *engine.Engine, spec preloadSpec) (preloadResult, error) {
	var done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var res preloadResult
	errc := make(chan error, spec.senders)
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		p := progress{last: start}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d := done.Load()
				p.print("sent %s of %s (%s), pending %s", humanInt(d), humanInt(int64(spec.n)),
					rate(int(d), time.Since(start)), humanInt(e.Stats().Pending.Load()))
			}
		}
	}()
	per := (spec.n + spec.senders - 1) / spec.senders
	for s := 0; s < spec.senders; s++ {
		lo, hi := s*per, min((s+1)*per, spec.n)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func(s, lo, hi int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s)+1, 0x5eed))
			reqs := make([]engine.SendRequest, spec.batch)
			lat := make([]int64, 0, (hi-lo)/spec.batch+1)
			defer func() {
				mu.Lock()
				res.batchLat = append(res.batchLat, lat...)
				mu.Unlock()
			}()
			for i := lo; i < hi; i += spec.batch {
				k := min(spec.batch, hi-i)
				for j := 0; j < k; j++ {
					m := message.Message{Topic: spec.topic, Body: spec.body}
					if spec.keyPrefix != "" {
						m.Key = spec.keyPrefix + strconv.Itoa(i+j)
					}
					reqs[j] = engine.SendRequest{Message: m, When: message.When{At: spec.due(i+j, rng)}}
				}
				t := time.Now()
				_, err := e.SendBatch(bg, reqs[:k])
				lat = append(lat, int64(time.Since(t)))
				if err != nil {
					errc <- fmt.Errorf("send batch at %d: %w", i, err)
					return
				}
				done.Add(int64(k))
			}
		}(s, lo, hi)
	}
	wg.Wait()
	close(stop)
	res.took = time.Since(start)
	select {
	case err := <-errc:
		return res, err
	default:
	}
	return res, nil
}

// uniformDue spreads due times uniformly over [from, from+span) ms.
func uniformDue(from, span int64) func(int, *rand.Rand) int64 {
	return func(_ int, rng *rand.Rand) int64 { return from + rng.Int64N(span) }
}
