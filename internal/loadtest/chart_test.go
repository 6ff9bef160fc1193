package loadtest

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
	"time"
)

// countColour counts the pixels of img inside r that are exactly c.
func countColour(img image.Image, r image.Rectangle, c color.RGBA) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				n++
			}
		}
	}
	return n
}

func TestChartPNG(t *testing.T) {
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
	// An early arrival must not vanish: it is drawn on the bottom edge.
	d.points = append(d.points, chartPoint{x: 1, late: -3 * ms, series: 0})

	var buf bytes.Buffer
	if err := png.Encode(&buf, renderChart(d)); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != chartW || b.Dy() != chartH {
		t.Fatalf("size %v, want %dx%d", b.Size(), chartW, chartH)
	}
	plot := plotRect()
	for i := range d.series {
		if n := countColour(img, plot, palette[i]); n < 100 {
			t.Errorf("series %d: %d pixels of its colour in the plot area, want its points", i, n)
		}
		// The legend, above the plot, shows every colour too.
		if n := countColour(img, image.Rect(0, 0, chartW, plot.Min.Y), palette[i]); n == 0 {
			t.Errorf("series %d has no legend swatch", i)
		}
	}
	if n := countColour(img, plot, palette[3]); n != 0 {
		t.Errorf("%d pixels of an unused series colour in the plot area", n)
	}
	if n := countColour(img, plot, downShade); n == 0 {
		t.Error("the down span is not shaded")
	}
	bottomRow := image.Rect(plot.Min.X, plot.Max.Y-2, plot.Max.X, plot.Max.Y)
	if countColour(img, bottomRow, palette[0]) == 0 {
		t.Error("the early point is not on the bottom edge")
	}
	// Axes and text are black ink outside the plot area.
	if countColour(img, image.Rect(0, plot.Max.Y+1, chartW, chartH), black) == 0 ||
		countColour(img, image.Rect(0, 0, plot.Min.X-1, chartH), black) == 0 {
		t.Error("no axis labels drawn")
	}
}

func TestChartEmpty(t *testing.T) {
	img := renderChart(chartData{title: "nothing", series: []string{"1s"}})
	if img.Bounds().Dx() != chartW {
		t.Fatalf("size %v", img.Bounds())
	}
	if n := countColour(img, plotRect(), palette[0]); n != 0 {
		t.Errorf("%d series pixels in a chart without points", n)
	}
}

func TestGlyphs(t *testing.T) {
	need := "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .,:-+/%()=_<>"
	seen := map[glyph]rune{}
	for _, r := range need {
		g, ok := glyphs[r]
		if !ok {
			t.Errorf("no glyph for %q", r)
			continue
		}
		if g == (glyph{}) && r != ' ' {
			t.Errorf("glyph %q is blank", r)
		}
		if other, dup := seen[g]; dup {
			t.Errorf("glyphs %q and %q are identical", r, other)
		}
		seen[g] = r
	}
}

func TestDrawText(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 100, 40))
	fillRect(img, img.Bounds(), white)
	drawText(img, 10, 5, "Hg1", black, 2)
	box := image.Rect(10, 5, 10+textWidth("Hg1", 2), 5+textHeight*2)
	inside := countColour(img, box, black)
	if inside == 0 {
		t.Fatal("no ink drawn")
	}
	if total := countColour(img, img.Bounds(), black); total != inside {
		t.Errorf("%d ink pixels outside the text box %v", total-inside, box)
	}
	// 'g' has a descender: ink below the baseline (font row 7).
	if countColour(img, image.Rect(box.Min.X, 5+7*2, box.Max.X, box.Max.Y), black) == 0 {
		t.Error("the descender of g is missing")
	}
	// An unknown rune is a visible box, not nothing.
	img2 := image.NewRGBA(image.Rect(0, 0, 20, 20))
	drawText(img2, 0, 0, "\u2603", black, 1)
	if countColour(img2, img2.Bounds(), black) == 0 {
		t.Error("an unknown rune drew nothing")
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
