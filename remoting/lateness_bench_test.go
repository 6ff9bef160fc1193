//go:build !race

package remoting

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// BenchmarkClientLateness measures, through the official Go client, how
// late level-delayed messages reach a push consumer: 2,000 messages over
// levels 1 to 4 of a 1-2-3-4 s table, sent by 8 producers at once, then a
// herd of 2,000 at one level. Run with -benchtime 1x: each iteration sends
// both sets and reports lateness p50, p99 and max in ms, and the sends per
// second.
func BenchmarkClientLateness(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchLateness(b)
	}
}

func benchLateness(b *testing.B) {
	levels := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}
	tb := startBench(b, levels)
	const n = 2000
	var mu sync.Mutex
	due := map[string]time.Time{}
	got := make(chan delivery, 2*n)
	c := newBenchPush(b, tb, got)
	defer c.Shutdown()
	for _, herd := range []bool{false, true} {
		ps := make([]*benchProducer, 8)
		for i := range ps {
			ps[i] = newBenchProducer(b, tb)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for w := range ps {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for j := w; j < n; j += len(ps) {
					level := 1 + j%4
					if herd {
						level = 2
					}
					m := primitive.NewMessage("late", []byte(fmt.Sprint(herd, j))).WithDelayTimeLevel(level)
					sent := time.Now()
					res, err := ps[w].p.SendSync(context.Background(), m)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					due[res.MsgID] = sent.Add(levels[level-1])
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
		rate := float64(n) / time.Since(start).Seconds()
		var late []float64
		for len(late) < n {
			select {
			case d := <-got:
				mu.Lock()
				at, ok := due[d.msg.MsgId]
				delete(due, d.msg.MsgId)
				mu.Unlock()
				if ok {
					late = append(late, float64(d.at.Sub(at).Microseconds())/1000)
				}
			case <-time.After(30 * time.Second):
				b.Fatalf("%d of %d delivered", len(late), n)
			}
		}
		for _, p := range ps {
			p.p.Shutdown()
		}
		slices.Sort(late)
		name := map[bool]string{false: "levels", true: "herd"}[herd]
		b.ReportMetric(late[len(late)/2], name+"-p50-ms")
		b.ReportMetric(late[len(late)*99/100], name+"-p99-ms")
		b.ReportMetric(late[len(late)-1], name+"-max-ms")
		b.ReportMetric(rate, name+"-sends/s")
	}
}
