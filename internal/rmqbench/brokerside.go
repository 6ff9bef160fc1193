package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// brokerLateness is the broker's own view of a phase, for hourglass only
// (-metrics): how late after their due time its messages became visible,
// from the histogram hourglass_lateness_seconds of /metrics read before
// and after the phase. Its buckets bound the quantiles from above: P99LeMs
// 25 means 99% were visible at most 25 ms late. Set beside the client's
// figures, it tells the broker's part from that of the gRPC delivery and
// the client. -1 means beyond the histogram's largest finite bound.
type brokerLateness struct {
	Count   int     `json:"count"`
	P50LeMs float64 `json:"p50_le_ms"`
	P99LeMs float64 `json:"p99_le_ms"`
	MaxLeMs float64 `json:"max_le_ms"`
}

const latenessBucket = `hourglass_lateness_seconds_bucket{le="`

// bucketCounts is a cumulative histogram: upper bound (s) -> count.
type bucketCounts map[float64]float64

// readBuckets fetches url (a Prometheus text page) and returns its
// lateness histogram.
func readBuckets(url string) (bucketCounts, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseBuckets(resp.Body)
}

// parseBuckets reads the lateness histogram's buckets from Prometheus text.
func parseBuckets(r io.Reader) (bucketCounts, error) {
	out := bucketCounts{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), latenessBucket)
		if !ok {
			continue
		}
		le, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			return nil, fmt.Errorf("bad bucket line %q", sc.Text())
		}
		bound := math.Inf(1)
		if le != "+Inf" {
			b, err := strconv.ParseFloat(le, 64)
			if err != nil {
				return nil, fmt.Errorf("bad bucket bound %q", le)
			}
			bound = b
		}
		n, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return nil, fmt.Errorf("bad bucket count %q", val)
		}
		out[bound] = n
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s...} lines", latenessBucket)
	}
	return out, nil
}

// since is the lateness of what became visible between before and after.
func since(before, after bucketCounts) brokerLateness {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	delta := func(b float64) float64 { return after[b] - before[b] }
	total := delta(math.Inf(1))
	bl := brokerLateness{Count: int(total)}
	if total <= 0 {
		return bl
	}
	// The smallest bound whose cumulative count reaches q of the total.
	at := func(q float64) float64 {
		for _, b := range bounds {
			if delta(b) >= q*total {
				if math.IsInf(b, 1) {
					return -1
				}
				return b * 1000
			}
		}
		return -1
	}
	bl.P50LeMs, bl.P99LeMs, bl.MaxLeMs = at(0.5), at(0.99), at(1)
	return bl
}
