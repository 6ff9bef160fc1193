package loadtest

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"time"
)

// The chart: one dot per message at (due time since the run started,
// lateness), one colour per tier, lateness on a logarithmic axis because
// it spans from microseconds to the length of an outage. Lateness at or
// below the axis floor, and early arrivals, sit on the bottom edge (early
// ones are also counted in a note, since any is a failure). Spans when the
// broker was down are shaded.

// Chart geometry, in pixels.
const (
	chartW     = 1200
	chartH     = 720
	fontScale  = 2
	marginL    = 120
	marginR    = 30
	marginTop  = 84
	marginBot  = 84
	tickLen    = 6
	legendBox  = 14
	legendGap  = 24
	lowestAxis = int64(10 * time.Microsecond)
)

// palette holds the tier colours, chosen to stay apart from each other
// and from the grey and black of the frame.
var palette = []color.RGBA{
	{31, 119, 180, 255},  // blue
	{255, 127, 14, 255},  // orange
	{44, 160, 44, 255},   // green
	{214, 39, 40, 255},   // red
	{148, 103, 189, 255}, // purple
	{140, 86, 75, 255},   // brown
	{227, 119, 194, 255}, // pink
	{23, 190, 207, 255},  // cyan
}

var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{0, 0, 0, 255}
	gridGrey  = color.RGBA{225, 225, 225, 255}
	textGrey  = color.RGBA{90, 90, 90, 255}
	downShade = color.RGBA{255, 232, 232, 255}
)

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

// plotRect is the rectangle of the plotting area of a chart.
func plotRect() image.Rectangle {
	return image.Rect(marginL, marginTop, chartW-marginR, chartH-marginBot)
}

// renderChart draws d.
func renderChart(d chartData) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	fillRect(img, img.Bounds(), white)
	ax := newChartAxes(d)
	// Down spans, under everything else.
	for _, s := range d.down {
		r := image.Rect(ax.xpix(s[0]), ax.plot.Min.Y, ax.xpix(s[1])+1, ax.plot.Max.Y)
		fillRect(img, r, downShade)
		drawText(img, r.Min.X+3, ax.plot.Min.Y+3, "down", textGrey, 1)
	}
	ax.drawGrid(img)
	// Points.
	dot := 1
	switch n := len(d.points); {
	case n <= 5000:
		dot = 3
	case n <= 100000:
		dot = 2
	}
	for _, p := range d.points {
		c := palette[p.series%len(palette)]
		px, py := ax.xpix(p.x), ax.ypix(p.late)
		r := image.Rect(px-dot/2, py-dot/2, px-dot/2+dot, py-dot/2+dot).Intersect(ax.plot)
		fillRect(img, r, c)
	}
	drawFrameAndLegend(img, ax.plot, d, ax.early)
	return img
}

// chartAxes maps a chart's data to pixels: seconds on x, lateness on a
// log scale on y.
type chartAxes struct {
	plot     image.Rectangle
	xticks   []float64
	xlo, xhi float64
	ylo, yhi int64
	early    int // points with negative lateness
}

func newChartAxes(d chartData) *chartAxes {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	var lmin, lmax int64 = math.MaxInt64, 0
	ax := &chartAxes{plot: plotRect()}
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

func (ax *chartAxes) xpix(x float64) int {
	return ax.plot.Min.X + int(math.Round((x-ax.xlo)/(ax.xhi-ax.xlo)*float64(ax.plot.Dx()-1)))
}

func (ax *chartAxes) ypix(ns int64) int {
	if ns <= ax.ylo {
		return ax.plot.Max.Y - 1
	}
	f := (math.Log10(float64(ns)) - math.Log10(float64(ax.ylo))) / (math.Log10(float64(ax.yhi)) - math.Log10(float64(ax.ylo)))
	return ax.plot.Max.Y - 1 - int(math.Round(f*float64(ax.plot.Dy()-1)))
}

// drawGrid draws the grid lines, ticks and their labels.
func (ax *chartAxes) drawGrid(img *image.RGBA) {
	plot := ax.plot
	for _, x := range ax.xticks {
		px := ax.xpix(x)
		fillRect(img, image.Rect(px, plot.Min.Y, px+1, plot.Max.Y), gridGrey)
		fillRect(img, image.Rect(px, plot.Max.Y, px+1, plot.Max.Y+tickLen), black)
		label := formatSeconds(x, ax.xticks[1]-ax.xticks[0])
		drawText(img, px-textWidth(label, fontScale)/2, plot.Max.Y+tickLen+4, label, black, fontScale)
	}
	for v := ax.ylo; v <= ax.yhi; v *= 10 {
		py := ax.ypix(v)
		fillRect(img, image.Rect(plot.Min.X, py, plot.Max.X, py+1), gridGrey)
		for _, m := range []int64{2, 5} {
			if v*m < ax.yhi {
				pm := ax.ypix(v * m)
				for x := plot.Min.X; x < plot.Max.X; x += 6 {
					fillRect(img, image.Rect(x, pm, x+2, pm+1), gridGrey)
				}
			}
		}
		fillRect(img, image.Rect(plot.Min.X-tickLen, py, plot.Min.X, py+1), black)
		label := formatNs(v)
		drawText(img, plot.Min.X-tickLen-6-textWidth(label, fontScale), py-7*fontScale/2, label, black, fontScale)
	}
}

// drawFrameAndLegend draws the plot's frame, the titles and the legend.
func drawFrameAndLegend(img *image.RGBA, plot image.Rectangle, d chartData, early int) {
	lh := textHeight * fontScale
	fillRect(img, image.Rect(plot.Min.X-1, plot.Min.Y-1, plot.Max.X+1, plot.Min.Y), black)
	fillRect(img, image.Rect(plot.Min.X-1, plot.Max.Y, plot.Max.X+1, plot.Max.Y+1), black)
	fillRect(img, image.Rect(plot.Min.X-1, plot.Min.Y-1, plot.Min.X, plot.Max.Y+1), black)
	fillRect(img, image.Rect(plot.Max.X, plot.Min.Y-1, plot.Max.X+1, plot.Max.Y+1), black)
	drawText(img, (chartW-textWidth(d.title, fontScale))/2, 12, d.title, black, fontScale)
	drawText(img, plot.Min.X+(plot.Dx()-textWidth(d.xTitle, fontScale))/2, plot.Max.Y+tickLen+4+lh+10, d.xTitle, black, fontScale)
	yTitle := "lateness (log scale)"
	drawTextVertical(img, 14, plot.Min.Y+(plot.Dy()+textWidth(yTitle, fontScale))/2, yTitle, black, fontScale)

	x := plot.Min.X
	ly := 12 + lh + 12
	for i, name := range d.series {
		fillRect(img, image.Rect(x, ly, x+legendBox, ly+legendBox), palette[i%len(palette)])
		x += legendBox + 6
		drawText(img, x, ly, name, black, fontScale)
		x += textWidth(name, fontScale) + legendGap
	}
	if early > 0 {
		note := fmt.Sprintf("%d early (on the bottom edge)", early)
		drawText(img, plot.Max.X-textWidth(note, fontScale), ly, note, palette[3], fontScale)
	}
}

// writePNG encodes img to path.
func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
