package loadtest

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// svg writes the elements of a chart; the first write error is kept and
// later writes do nothing (bufio.Writer's rule).
type svg struct{ w *bufio.Writer }

func (s svg) printf(format string, args ...any) { fmt.Fprintf(s.w, format, args...) }

// text writes a label; the string is escaped, so any title is safe.
func (s svg) text(x, y float64, anchor, style, str string) {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(str))
	s.printf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>%s</text>\n", x, y, anchor, style, b.String())
}

// rect is the plot area of a panel.
type rect struct{ x0, y0, x1, y1 float64 }

func (r rect) w() float64 { return r.x1 - r.x0 }
func (r rect) h() float64 { return r.y1 - r.y0 }

// writeChart writes d as a self-contained SVG document to w.
func writeChart(w io.Writer, d chartData) error {
	s := svg{bufio.NewWriter(w)}
	ax := newChartAxes(d)
	s.printf("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"14\">\n",
		chartW, chartH, chartW, chartH)
	s.printf("<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n")
	s.text(chartW/2, 28, "middle", ` font-size="18"`, d.title)
	legend(s, d, ax.early)
	late := rect{marginL, chartTop, chartW - marginR, chartTop + panelH}
	latenessPanel(s, late, d, ax)
	hist := rect{marginL, late.y1 + panelGap, chartW - marginR, late.y1 + panelGap + histH}
	histogramPanel(s, hist, d, ax)
	s.printf("</svg>\n")
	return s.w.Flush()
}

// legend writes the series' swatches and, when there are any, the count of
// early arrivals.
func legend(s svg, d chartData, early int) {
	x := float64(marginL)
	for i, name := range d.series {
		s.printf("<rect x=\"%.1f\" y=\"48\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", x, palette[i%len(palette)])
		s.text(x+20, 60, "start", "", name)
		x += 20 + 9*float64(len(name)) + 24
	}
	if early > 0 {
		s.text(chartW-marginR, 60, "end", ` fill="#d62728"`, fmt.Sprintf("%d early (bottom edge; first bin of the histogram)", early))
	}
}

// latenessPanel writes the lateness-over-the-run panel: down spans, the
// grid, and the density cells, each as opaque as its count allows.
func latenessPanel(s svg, r rect, d chartData, ax chartAxes) {
	for _, span := range d.down {
		x0, x1 := r.x0+ax.xFrac(span[0])*r.w(), r.x0+ax.xFrac(span[1])*r.w()
		s.printf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffe8e8\" class=\"down\"/>\n", x0, r.y0, max(x1-x0, 1), r.h())
		s.text(x0+3, r.y0+14, "start", ` fill="#5a5a5a" font-size="12"`, "down")
	}
	for _, x := range ax.xticks {
		px := r.x0 + ax.xFrac(x)*r.w()
		s.printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e1e1e1\"/>\n", px, r.y0, px, r.y1)
		s.text(px, r.y1+20, "middle", "", formatSeconds(x, ax.xticks[1]-ax.xticks[0]))
	}
	for v := ax.ylo; v <= ax.yhi; v *= 10 {
		py := r.y1 - ax.yFrac(v)*r.h()
		s.printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e1e1e1\"/>\n", r.x0, py, r.x1, py)
		s.text(r.x0-8, py+5, "end", "", formatNs(v))
	}
	cells, most := ax.density(d)
	cw, ch := r.w()/densityCols, r.h()/densityRows
	labels := labelledCells(cells)
	for i, c := range cells {
		cx, cy := r.x0+(float64(c.col)+0.5)*cw, r.y1-(float64(c.row)+0.5)*ch
		rad := cellRadius(c.count, len(cells))
		s.printf("<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"%s\" fill-opacity=\"0.6\" data-count=\"%d\"><title>%d</title></circle>\n",
			cx, cy, rad, palette[c.series%len(palette)], c.count, c.count)
		if labels[i] {
			s.text(cx+rad+3, cy+4, "start", ` font-size="11"`, fmt.Sprintf("%d", c.count))
		}
	}
	frame(s, r)
	s.text(r.x0+r.w()/2, r.y1+48, "middle", "", d.xTitle)
	s.text(24, r.y0+r.h()/2, "middle", fmt.Sprintf(` transform="rotate(-90 24 %.1f)"`, r.y0+r.h()/2), "lateness (log scale)")
	s.text(r.x1, r.y0-8, "end", ` fill="#5a5a5a" font-size="12"`,
		fmt.Sprintf("each circle: the messages of a tier at that time and lateness, its area their count (the most in one: %d)", most))
}

// histogramPanel writes the histogram: per lateness bin one bar per
// series, its height the count, with the count in the bar's title.
func histogramPanel(s svg, r rect, d chartData, ax chartAxes) {
	counts, edges := ax.histogram(d)
	most := 1
	for _, cs := range counts {
		for _, n := range cs {
			most = max(most, n)
		}
	}
	ticks, _, top := niceTicks(0, float64(most))
	for _, v := range ticks {
		py := r.y1 - v/top*r.h()
		s.printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e1e1e1\"/>\n", r.x0, py, r.x1, py)
		s.text(r.x0-8, py+5, "end", "", fmt.Sprintf("%.0f", v))
	}
	nb := len(edges)
	bw := r.w() / float64(nb)
	for b := range nb {
		x := r.x0 + float64(b)*bw
		switch {
		case b == 0:
			s.text(x+bw/2, r.y1+20, "middle", ` font-size="12"`, "early")
		case b == 1:
			s.text(x+bw/2, r.y1+20, "middle", ` font-size="12"`, "≤"+formatNs(edges[1]))
		case (b-1)%binsPerDecade == 0:
			s.text(x+bw, r.y1+20, "middle", ` font-size="12"`, formatNs(edges[b]))
		}
		for i, cs := range counts {
			if cs[b] == 0 {
				continue
			}
			h := float64(cs[b]) / top * r.h()
			sw := (bw - 2) / float64(len(counts))
			s.printf("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" data-series=\"%d\" data-bin=\"%d\" data-count=\"%d\"><title>%s: %d</title></rect>\n",
				x+1+float64(i)*sw, r.y1-h, sw, max(h, 1), palette[i%len(palette)], i, b, cs[b], d.series[i], cs[b])
		}
	}
	frame(s, r)
	s.text(r.x0+r.w()/2, r.y0-14, "middle", ` font-size="16"`, "how many messages arrived at each lateness")
	s.text(r.x0+r.w()/2, r.y1+46, "middle", "", fmt.Sprintf("lateness (log bins, %d a decade; a bin holds up to its right edge)", binsPerDecade))
	s.text(24, r.y0+r.h()/2, "middle", fmt.Sprintf(` transform="rotate(-90 24 %.1f)"`, r.y0+r.h()/2), "messages")
}

// cellRadius is the radius of a circle of count messages: its area grows
// with the count up to a cap, which is smaller the more circles there are,
// so that a dense run stays readable and a herd's few crowded moments
// stand out.
func cellRadius(count, circles int) float64 {
	const unit = 1.8 // one message
	capR := math.Min(14, math.Max(2.5, 60/math.Sqrt(float64(circles))))
	return math.Min(capR, unit*math.Sqrt(float64(count)))
}

// maxLabels bounds the counts written beside circles.
const maxLabels = 40

// labelledCells marks the cells whose count is written beside their
// circle: those of 20 messages or more, the fullest first, at most
// maxLabels, where the cap hides how many a circle holds.
func labelledCells(cells []cell) []bool {
	order := make([]int, 0, len(cells))
	for i, c := range cells {
		if c.count >= 20 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return cells[order[a]].count > cells[order[b]].count })
	out := make([]bool, len(cells))
	for _, i := range order[:min(len(order), maxLabels)] {
		out[i] = true
	}
	return out
}

// frame draws the border of a plot area.
func frame(s svg, r rect) {
	s.printf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n", r.x0, r.y0, r.w(), r.h())
}

// writeChartFile writes d as SVG to path.
func writeChartFile(path string, d chartData) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeChart(f, d); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
