package browser_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkConsoleFirstRender measures what opening the console costs: the
// bytes transferred (the console's files, and its first API calls) and the
// time from navigation to the overview showing data (the pending count and
// the forecast chart drawn), in a fresh browser each run, against a broker
// with HOURGLASS_CONSOLE_PENDING pending messages (default 1,000,000, due
// over the next 7 days, with a herd of 5,000 at one minute) and, as the
// baseline in the same run, an empty broker.
//
//	go test -run '^$' -bench ConsoleFirstRender -benchtime 3x -v ./console/browser
func BenchmarkConsoleFirstRender(b *testing.B) {
	needBrowser(b)
	n := 1_000_000
	if s := os.Getenv("HOURGLASS_CONSOLE_PENDING"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("HOURGLASS_CONSOLE_PENDING=%q: %v", s, err)
		}
	}
	for _, pending := range []int{0, n} {
		br := startBroker(b, "")
		if pending > 0 {
			start := time.Now()
			fill(b, br, pending)
			b.Logf("filled %d pending in %v", pending, time.Since(start).Round(time.Millisecond))
		}
		b.Run("pending="+strconv.Itoa(pending), func(b *testing.B) {
			var toData []float64
			var files, first float64
			for i := 0; i < b.N; i++ {
				tb := newTab(b)
				ms, f, all := tb.firstRender(br.base, pending)
				toData = append(toData, ms)
				files, first = f, all
				if i == 0 && pending > 0 {
					tb.screenshot("overview-1m-pending")
				}
			}
			sort.Float64s(toData)
			b.ReportMetric(toData[len(toData)/2], "ms-to-data")
			b.ReportMetric(files, "file-bytes")
			b.ReportMetric(first, "first-load-bytes")
			b.Logf("pending %d: ms to data %v (median %.0f), console files %.0f B, everything until data %.0f B",
				pending, toData, toData[len(toData)/2], files, first)
		})
	}
}

// firstRender opens the console and returns the milliseconds from
// navigation start until the overview shows the pending count and the
// forecast chart, the bytes of the console's files and the bytes of all
// transfers until then (headers included, as the Resource Timing API
// counts them).
func (tb *tab) firstRender(base string, pending int) (ms, files, all float64) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(base + "/ui/"))
	// The page's own clock when both are in the DOM, checked on every
	// change of the DOM.
	ready := fmt.Sprintf(`(() => { const p = document.querySelector("#m-pending");
		return p && p.textContent === %q && document.querySelector("#forecast-chart rect.bar") ? (window.__done = performance.now()) : 0; })()`,
		groupThousands(strconv.Itoa(pending)))
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	done, err := chromedp.Run(ctx, chromedp.Poll[float64](ready, chromedp.WithPollingMutation()))
	if err != nil {
		tb.t.Fatalf("the overview never showed %d pending with its chart: %v", pending, err)
	}
	sizes := tb.eval(`(() => {
		const nav = performance.getEntriesByType("navigation")[0];
		let files = nav.transferSize, all = nav.transferSize;
		for (const r of performance.getEntriesByType("resource")) {
			if (r.startTime > window.__done) continue;
			all += r.transferSize;
			if (r.initiatorType !== "fetch") files += r.transferSize;
		}
		return files + " " + all;
	})()`)
	fmt.Sscan(sizes, &files, &all)
	return done, files, all
}

// groupThousands writes a count as the console does (en-US grouping).
func groupThousands(s string) string {
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// fill sends n messages in batches of 1,000 from 8 senders: due uniformly
// over the next 7 days, 5,000 of them at one instant 30 minutes ahead.
func fill(b *testing.B, br *broker, n int) {
	b.Helper()
	now := time.Now().UnixMilli()
	herdAt := (now/60_000 + 30) * 60_000
	var wg sync.WaitGroup
	batches := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for first := range batches {
				msgs := make([]map[string]any, 0, 1000)
				for i := first; i < min(first+1000, n); i++ {
					at := now + 60_000 + rng.Int64N(7*86400_000)
					if i < 5000 {
						at = herdAt
					}
					msgs = append(msgs, map[string]any{"body": "p", "at": at})
				}
				br.call("POST", "/v1/topics/load/batch", map[string]any{"messages": msgs}, http.StatusOK, nil)
			}
		}(uint64(w))
	}
	for first := 0; first < n; first += 1000 {
		batches <- first
	}
	close(batches)
	wg.Wait()
}
