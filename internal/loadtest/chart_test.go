package loadtest

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

// svgElem is one element of a chart: its name, attributes and text.
type svgElem struct {
	name  string
	attr  map[string]string
	chars string
}

// parseChart renders d and parses the document (parseSVG).
func parseChart(t *testing.T, d chartData) []svgElem {
	t.Helper()
	var buf bytes.Buffer
	if err := writeChart(&buf, d); err != nil {
		t.Fatal(err)
	}
	return parseSVG(t, buf.Bytes())
}

// parseSVG parses a chart as XML (it must be well formed), returning its
// elements in order.
func parseSVG(t *testing.T, data []byte) []svgElem {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var out []svgElem
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			e := svgElem{name: tk.Name.Local, attr: map[string]string{}}
			for _, a := range tk.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			out = append(out, e)
		case xml.CharData:
			if len(out) > 0 {
				out[len(out)-1].chars += string(tk)
			}
		}
	}
	if len(out) == 0 || out[0].name != "svg" {
		t.Fatalf("the chart is not an SVG document: %v", out)
	}
	return out
}

// histogramBars sums the counts of the histogram's bars per series.
func histogramBars(t *testing.T, els []svgElem) map[int]int {
	t.Helper()
	sums := map[int]int{}
	for _, e := range els {
		if e.name != "rect" || e.attr["data-bin"] == "" {
			continue
		}
		series, err1 := strconv.Atoi(e.attr["data-series"])
		n, err2 := strconv.Atoi(e.attr["data-count"])
		if err1 != nil || err2 != nil {
			t.Fatalf("bar with bad data attributes: %v", e.attr)
		}
		sums[series] += n
	}
	return sums
}

// texts joins the chart's text elements.
func texts(els []svgElem) string {
	var b strings.Builder
	for _, e := range els {
		if e.name == "text" {
			b.WriteString(e.chars + "\n")
		}
	}
	return b.String()
}

func TestChartSVG(t *testing.T) {
	ms := int64(time.Millisecond)
	d := chartData{
		title: "test chart", xTitle: "due time", series: []string{"1s", "5s", "30s"},
		down: [][2]float64{{20, 25}},
	}
	for i := range 300 {
		d.points = append(d.points,
			chartPoint{x: float64(i) / 10, late: int64(1+i%7) * ms, series: 0},
			chartPoint{x: 5 + float64(i)/10, late: int64(20+i) * ms, series: 1},
			chartPoint{x: 10 + float64(i)/10, late: int64(i+1) * int64(time.Microsecond) * 50, series: 2})
	}
	// An early arrival must not vanish: it is counted in the early bin and
	// in a note.
	d.points = append(d.points, chartPoint{x: 1, late: -3 * ms, series: 0})
	els := parseChart(t, d)
	if w, h := els[0].attr["width"], els[0].attr["height"]; w != strconv.Itoa(chartW) || h != strconv.Itoa(chartH) {
		t.Fatalf("size %sx%s, want %dx%d", w, h, chartW, chartH)
	}
	// Every series is in the legend and in the cells, and every message in
	// the histogram.
	txt := texts(els)
	cells := map[string]int{}
	for _, e := range els {
		if e.name == "circle" && e.attr["data-count"] != "" {
			n, _ := strconv.Atoi(e.attr["data-count"])
			cells[e.attr["fill"]] += n
		}
	}
	for i, name := range d.series {
		if !strings.Contains(txt, name+"\n") {
			t.Errorf("series %s is not in the legend", name)
		}
		want := 300
		if i == 0 {
			want = 301
		}
		if cells[palette[i]] != want {
			t.Errorf("series %d: %d messages in the cells, want %d", i, cells[palette[i]], want)
		}
	}
	if got := histogramBars(t, els); got[0] != 301 || got[1] != 300 || got[2] != 300 {
		t.Errorf("histogram counts per series %v, want 301, 300, 300", got)
	}
	if !strings.Contains(txt, "1 early") {
		t.Error("no note of the early arrival")
	}
	down := 0
	for _, e := range els {
		if e.attr["class"] == "down" {
			down++
		}
	}
	if down != 1 {
		t.Errorf("%d shaded down spans, want 1", down)
	}
	if !strings.Contains(txt, "lateness (log scale)") || !strings.Contains(txt, "1ms\n") {
		t.Error("no axis labels drawn")
	}
}

// TestChartHerdCountsVisible is issue 30's "a herd of 3,000 shows as
// about 10 dots": 3,000 messages that arrive in a few receive batches land
// in a few cells, and the chart still says how many: the histogram's bars
// add up to 3,000, a crowded cell's circle is larger than a lone
// message's, and its count is written beside it.
func TestChartHerdCountsVisible(t *testing.T) {
	d := chartData{title: "herd", xTitle: "arrival time", series: []string{"herd"}}
	for i := range 3000 {
		late := int64(5+(i/300)*3) * int64(time.Millisecond) // ten batches of 300
		d.points = append(d.points, chartPoint{x: 10 + float64(late)/1e9, late: late})
	}
	d.points = append(d.points, chartPoint{x: 14, late: 4 * int64(time.Second)}) // a straggler
	els := parseChart(t, d)
	if got := histogramBars(t, els); got[0] != 3001 {
		t.Fatalf("histogram holds %d messages, want 3001", got[0])
	}
	radius := map[int]float64{}
	total := 0
	for _, e := range els {
		if e.name != "circle" {
			continue
		}
		n, _ := strconv.Atoi(e.attr["data-count"])
		r, _ := strconv.ParseFloat(e.attr["r"], 64)
		radius[n], total = r, total+n
	}
	if total != 3001 || len(radius) != 2 || radius[300] <= 2*radius[1] {
		t.Fatalf("circles by count %v (total %d): want ten of 300, larger than the one of 1", radius, total)
	}
	txt := texts(els)
	if strings.Count(txt, "300\n") < 10 || !strings.Contains(txt, "the most in one: 300") {
		t.Errorf("the crowded cells' counts are not written:\n%s", txt)
	}
}

// TestChartEscapesText: a title with markup characters stays text.
func TestChartEscapesText(t *testing.T) {
	els := parseChart(t, chartData{title: `run <a & "b">`, series: []string{"<s>"}})
	if txt := texts(els); !strings.Contains(txt, `run <a & "b">`) || !strings.Contains(txt, "<s>") {
		t.Fatalf("title or series lost: %q", txt)
	}
}

func TestChartEmpty(t *testing.T) {
	els := parseChart(t, chartData{title: "nothing", series: []string{"1s"}})
	for _, e := range els {
		if e.name == "rect" && e.attr["data-count"] != "" {
			t.Errorf("a data element in a chart without points: %v", e.attr)
		}
	}
}

func TestAxes(t *testing.T) {
	ticks, lo, hi := niceTicks(3, 297)
	if lo > 3 || hi < 297 || len(ticks) < 4 || len(ticks) > 12 {
		t.Errorf("niceTicks(3, 297) = %v [%v, %v]", ticks, lo, hi)
	}
	for i := 1; i < len(ticks); i++ {
		if step := ticks[i] - ticks[i-1]; step != ticks[1]-ticks[0] {
			t.Errorf("uneven ticks %v", ticks)
		}
	}
	us, ms := int64(time.Microsecond), int64(time.Millisecond)
	for _, c := range []struct{ lo, hi, wantLo, wantHi int64 }{
		{3 * ms, 40 * ms, ms, 100 * ms},
		{1, 5 * ms, 10 * us, 10 * ms},
		{2 * ms, 2 * ms, ms, 10 * ms},
		{0, 0, 100 * us, 10 * ms},
	} {
		lo, hi := logRange(c.lo, c.hi)
		if lo != c.wantLo || hi != c.wantHi {
			t.Errorf("logRange(%d, %d) = %d, %d; want %d, %d", c.lo, c.hi, lo, hi, c.wantLo, c.wantHi)
		}
	}
	for _, c := range []struct {
		s, step float64
		want    string
	}{{0, 1, "0s"}, {2.5, 0.5, "2.5s"}, {90, 10, "90s"}, {300, 50, "300s"}, {300, 60, "5m"}, {0, 120, "0m"}, {7200, 3600, "2h"}} {
		if got := formatSeconds(c.s, c.step); got != c.want {
			t.Errorf("formatSeconds(%v, step %v) = %q, want %q", c.s, c.step, got, c.want)
		}
	}
	for _, c := range []struct {
		ns   int64
		want string
	}{{10 * us, "10us"}, {ms, "1ms"}, {100 * ms, "100ms"}, {10 * int64(time.Second), "10s"}} {
		if got := formatNs(c.ns); got != c.want {
			t.Errorf("formatNs(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{5 * time.Minute, "5m"}, {time.Hour, "1h"}, {90 * time.Minute, "1h30m"}, {200 * time.Millisecond, "200ms"},
		{90 * time.Second, "1m30s"}, {10 * time.Second, "10s"}, {0, "0s"}} {
		if got := shortDuration(c.d); got != c.want {
			t.Errorf("shortDuration(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}
