package loadtest

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// The chart (an SVG file, chartsvg.go) has two panels over the same
// messages, one colour per tier:
//
//   - lateness over the run: x the due time since the run started (a
//     herd's arrival time, since its due times are one instant), y the
//     lateness on a logarithmic axis, because it spans from microseconds
//     to the length of an outage. Messages are counted into cells, each
//     drawn as a circle whose area grows with its count (and, for a
//     crowded one, the count written beside it), so that a herd of
//     thousands arriving in a few receive batches shows as a few large,
//     numbered circles, not as a few dots drawn over each other. Spans
//     when the broker was down are shaded.
//   - how many messages at each lateness: a histogram with log-spaced
//     bins, one bar per tier, its height the count (a linear axis), so
//     that counts can be read off. Early arrivals (any is a failure) get
//     a bin of their own at the left, and a note.

// Chart geometry, in SVG user units (pixels at 100 %).
const (
	chartW     = 1200
	marginL    = 110
	marginR    = 30
	chartTop   = 90  // title and legend above the first panel
	panelH     = 400 // the plot area of the lateness panel
	histH      = 260 // the plot area of the histogram
	panelGap   = 110 // between the two plot areas: axis labels, the second title
	marginBot  = 70
	chartH     = chartTop + panelH + panelGap + histH + marginBot
	lowestAxis = int64(10 * time.Microsecond)
	// densityCols and densityRows bound the cells of the lateness panel,
	// and so the size of the file whatever the number of messages.
	densityCols = 240
	densityRows = 100
	// binsPerDecade is the histogram's resolution.
	binsPerDecade = 4
)

// palette holds the tier colours, chosen to stay apart from each other
// and from the grey and black of the frame.
var palette = []string{
	"#1f77b4", // blue
	"#ff7f0e", // orange
	"#2ca02c", // green
	"#d62728", // red
	"#9467bd", // purple
	"#8c564b", // brown
	"#e377c2", // pink
	"#17becf", // cyan
}

// chartPoint is one message: x in seconds since the run started, the
// lateness in nanoseconds and the index of its series.
type chartPoint struct {
	x      float64
	late   int64
	series int
}

// chartData is what the chart shows.
type chartData struct {
	title  string
	xTitle string
	series []string
	points []chartPoint
	// down lists [from, to] spans of x when the broker was down.
	down [][2]float64
}

// chartAxes maps a chart's data onto its scales: seconds on x, lateness on
// a log scale.
type chartAxes struct {
	xticks   []float64
	xlo, xhi float64
	ylo, yhi int64
	early    int // points with negative lateness
}

func newChartAxes(d chartData) chartAxes {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	var lmin, lmax int64 = math.MaxInt64, 0
	var ax chartAxes
	for _, p := range d.points {
		xmin, xmax = math.Min(xmin, p.x), math.Max(xmax, p.x)
		if p.late > 0 {
			lmin, lmax = min(lmin, p.late), max(lmax, p.late)
		}
		if p.late < 0 {
			ax.early++
		}
	}
	for _, s := range d.down {
		xmin, xmax = math.Min(xmin, s[0]), math.Max(xmax, s[1])
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	ax.xticks, ax.xlo, ax.xhi = niceTicks(xmin, xmax)
	ax.ylo, ax.yhi = logRange(lmin, lmax)
	return ax
}

// xFrac is x's place on the x axis, 0 to 1.
func (ax chartAxes) xFrac(x float64) float64 { return (x - ax.xlo) / (ax.xhi - ax.xlo) }

// yFrac is the lateness ns's place on the log axis, 0 (the floor, where
// lateness at or below it and early arrivals sit) to 1.
func (ax chartAxes) yFrac(ns int64) float64 {
	if ns <= ax.ylo {
		return 0
	}
	f := (math.Log10(float64(ns)) - math.Log10(float64(ax.ylo))) / (math.Log10(float64(ax.yhi)) - math.Log10(float64(ax.ylo)))
	return min(f, 1)
}

// cell is one cell of the lateness panel: the messages of one series whose
// x and lateness fall in it.
type cell struct {
	col, row, series, count int
}

// density counts the points into densityCols x densityRows cells per
// series; it returns the non-empty cells in a fixed order (series, then
// column, then row) and the largest count.
func (ax chartAxes) density(d chartData) ([]cell, int) {
	counts := map[[3]int]int{}
	for _, p := range d.points {
		col := min(int(ax.xFrac(p.x)*densityCols), densityCols-1)
		row := min(int(ax.yFrac(p.late)*densityRows), densityRows-1)
		counts[[3]int{p.series, col, row}]++
	}
	cells := make([]cell, 0, len(counts))
	most := 0
	for k, n := range counts {
		cells = append(cells, cell{series: k[0], col: k[1], row: k[2], count: n})
		most = max(most, n)
	}
	sortCells(cells)
	return cells, most
}

// sortCells orders cells by series, column, row: the file is the same for
// the same data.
func sortCells(cs []cell) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.series != b.series {
			return a.series < b.series
		}
		if a.col != b.col {
			return a.col < b.col
		}
		return a.row < b.row
	})
}

// histogram counts the points of each series into lateness bins:
// bin 0 holds the early ones, bin 1 those at or below the axis floor, and
// the others binsPerDecade log-spaced bins per decade up to the axis top.
// counts[series][bin]; edges[b] is the upper edge of bin b >= 1 (ns).
func (ax chartAxes) histogram(d chartData) (counts [][]int, edges []int64) {
	decades := int(math.Round(math.Log10(float64(ax.yhi) / float64(ax.ylo))))
	nb := 2 + decades*binsPerDecade
	edges = make([]int64, nb)
	edges[1] = ax.ylo
	for b := 2; b < nb; b++ {
		edges[b] = int64(math.Round(float64(ax.ylo) * math.Pow(10, float64(b-1)/binsPerDecade)))
	}
	counts = make([][]int, len(d.series))
	for i := range counts {
		counts[i] = make([]int, nb)
	}
	for _, p := range d.points {
		if p.series < 0 || p.series >= len(counts) {
			continue
		}
		b := 0
		if p.late >= 0 {
			b = 1 + min(int(math.Ceil(ax.yFrac(p.late)*float64(nb-2))), nb-2)
			if p.late <= ax.ylo {
				b = 1
			}
		}
		counts[p.series][b]++
	}
	return counts, edges
}

// niceTicks returns tick positions covering [lo, hi] at a step of 1, 2 or
// 5 times a power of ten, about 8 of them, and the widened range.
func niceTicks(lo, hi float64) (ticks []float64, from, to float64) {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 8
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow * 10
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*pow {
			step = m * pow
			break
		}
	}
	from = math.Floor(lo/step) * step
	to = math.Ceil(hi/step) * step
	if to == from {
		to = from + step
	}
	for v := from; v <= to+step/2; v += step {
		ticks = append(ticks, v)
	}
	return ticks, from, to
}

// logRange returns decade bounds (ns) around [lo, hi], with the floor at
// least lowestAxis. With no positive data it returns 100µs..10ms.
func logRange(lo, hi int64) (int64, int64) {
	if hi <= 0 || lo > hi {
		return int64(100 * time.Microsecond), int64(10 * time.Millisecond)
	}
	floor := lowestAxis
	for floor*10 <= lo {
		floor *= 10
	}
	ceil := floor * 10
	for ceil < hi {
		ceil *= 10
	}
	return floor, ceil
}

// formatNs renders a power-of-ten duration compactly: 10us, 1ms, 100s.
func formatNs(ns int64) string {
	switch {
	case ns < int64(time.Millisecond):
		return fmt.Sprintf("%dus", ns/int64(time.Microsecond))
	case ns < int64(time.Second):
		return fmt.Sprintf("%dms", ns/int64(time.Millisecond))
	default:
		return fmt.Sprintf("%ds", ns/int64(time.Second))
	}
}

// formatSeconds renders an x tick in the unit its step allows, so that
// all ticks of an axis share one unit: "0s", "2.5s", "90s", "5m", "2h".
func formatSeconds(s, step float64) string {
	switch {
	case math.Mod(step, 3600) == 0:
		return fmt.Sprintf("%.0fh", s/3600)
	case math.Mod(step, 60) == 0:
		return fmt.Sprintf("%.0fm", s/60)
	case s == math.Trunc(s):
		return fmt.Sprintf("%.0fs", s)
	default:
		return fmt.Sprintf("%gs", math.Round(s*1000)/1000)
	}
}
