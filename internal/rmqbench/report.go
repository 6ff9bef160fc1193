package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hourglass-mq/hourglass/benchreport"
)

// printReport writes one run's figures as text.
func printReport(w io.Writer, r report) {
	fmt.Fprintf(w, "%s (flush %s, TLS %v) at %s, run %d: %d messages of %d B per phase\n",
		r.System, r.Flush, r.TLS, r.Endpoint, r.Run, r.N, r.Size)
	for _, ph := range []struct {
		name string
		res  *phaseResult
	}{{"spread", r.Spread}, {"herd", r.Herd}, {fmt.Sprintf("paced at %d/s", r.PacedRate), r.Paced}} {
		if ph.res == nil {
			continue
		}
		x := ph.res
		fmt.Fprintf(w, "  %s (%s): sent %d (%d errors, %d acknowledged after their due time) at %.0f msgs/s, send p50/p99 %.2f/%.2f ms\n",
			ph.name, x.Topic, x.Sent, x.SendErrors, x.SentLate, x.SendRate, x.SendLatency.P50, x.SendLatency.P99)
		fmt.Fprintf(w, "    received %d, lost %d, early %d, duplicates %d, foreign %d, receive errors %d, ack errors %d\n",
			x.Received, x.Lost, x.Early, x.Duplicates, x.Foreign, x.ReceiveErrors, x.AckErrors)
		fmt.Fprintf(w, "    lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms, min %.1f ms\n",
			x.Lateness.P50, x.Lateness.P99, x.Lateness.Max, x.Lateness.Min)
		if x.Instant != nil {
			fmt.Fprintf(w, "    herd at %s: first arrival %.1f ms after it, last %.1f ms\n",
				x.Instant.UTC().Format("15:04:05.000"), x.HerdFirstMs, x.HerdLastMs)
		}
		if b := x.Broker; b != nil {
			fmt.Fprintf(w, "    broker side (visible - due, %d messages): p50 <= %g ms, p99 <= %g ms, max <= %g ms\n",
				b.Count, b.P50LeMs, b.P99LeMs, b.MaxLeMs)
		}
		if x.FirstSendError != "" {
			fmt.Fprintf(w, "    first send error: %s\n", x.FirstSendError)
		}
		if x.FirstRecvError != "" {
			fmt.Fprintf(w, "    first receive error: %s\n", x.FirstRecvError)
		}
		fmt.Fprintf(w, "    load average (1 min) during the phase: mean %.2f, max %.2f\n", x.Load.Mean, x.Load.Max)
	}
}

// metric is one row of the summary: its name and how to read it from a
// report (false when the report lacks the phase).
type metric struct {
	name string
	get  func(r report) (float64, bool)
}

// phaseOf reads a figure of the phase ph picks (false when the report
// lacks that phase).
func phaseOf(ph func(report) *phaseResult, f func(*phaseResult) float64) func(report) (float64, bool) {
	return func(r report) (float64, bool) {
		x := ph(r)
		if x == nil {
			return 0, false
		}
		return f(x), true
	}
}

func spreadOf(f func(*phaseResult) float64) func(report) (float64, bool) { return phaseOf(spreadPh, f) }
func herdOf(f func(*phaseResult) float64) func(report) (float64, bool)   { return phaseOf(herdPh, f) }
func pacedOf(f func(*phaseResult) float64) func(report) (float64, bool)  { return phaseOf(pacedPh, f) }

// brokerOf reads a broker-side figure of a phase, where there is one.
func brokerOf(ph func(report) *phaseResult, f func(*brokerLateness) float64) func(report) (float64, bool) {
	return func(r report) (float64, bool) {
		x := ph(r)
		if x == nil || x.Broker == nil {
			return 0, false
		}
		return f(x.Broker), true
	}
}

// latenessOf reads a figure of an optional lateness of a phase.
func latenessOf(ph func(report) *phaseResult, l func(*phaseResult) *benchreport.Lateness, f func(*benchreport.Lateness) float64) func(report) (float64, bool) {
	return func(r report) (float64, bool) {
		x := ph(r)
		if x == nil || l(x) == nil || l(x).Count == 0 {
			return 0, false
		}
		return f(l(x)), true
	}
}

func spreadPh(r report) *phaseResult { return r.Spread }
func herdPh(r report) *phaseResult   { return r.Herd }
func pacedPh(r report) *phaseResult  { return r.Paced }

func fromStore(x *phaseResult) *benchreport.Lateness  { return x.LatenessFromStore }
func fromAck(x *phaseResult) *benchreport.Lateness    { return x.LatenessFromAck }
func fromPushed(x *phaseResult) *benchreport.Lateness { return x.FromPushedStore }
func p50(l *benchreport.Lateness) float64             { return l.P50 }
func p99(l *benchreport.Lateness) float64             { return l.P99 }
func maxOf(l *benchreport.Lateness) float64           { return l.Max }

// earlyFromStore reads the spread's arrivals before their due time
// counted from the broker's store time, where the report has that time.
func earlyFromStore(r report) (float64, bool) {
	if r.Spread == nil || r.Spread.LatenessFromStore == nil {
		return 0, false
	}
	return float64(r.Spread.EarlyFromStore), true
}

var metrics = []metric{
	{"spread: lateness p50 (ms)", spreadOf(func(x *phaseResult) float64 { return x.Lateness.P50 })},
	{"spread: lateness p99 (ms)", spreadOf(func(x *phaseResult) float64 { return x.Lateness.P99 })},
	{"spread: lateness max (ms)", spreadOf(func(x *phaseResult) float64 { return x.Lateness.Max })},
	{"spread: early", spreadOf(func(x *phaseResult) float64 { return float64(x.Early) })},
	{"spread: lost", spreadOf(func(x *phaseResult) float64 { return float64(x.Lost) })},
	{"spread: send rate (msgs/s)", spreadOf(func(x *phaseResult) float64 { return x.SendRate })},
	{"spread: send p99 (ms)", spreadOf(func(x *phaseResult) float64 { return x.SendLatency.P99 })},
	{"spread: lateness from the broker's store time p50 (ms)", latenessOf(spreadPh, fromStore, p50)},
	{"spread: lateness from the broker's store time p99 (ms)", latenessOf(spreadPh, fromStore, p99)},
	{"spread: lateness from the broker's store time max (ms)", latenessOf(spreadPh, fromStore, maxOf)},
	{"spread: early from the broker's store time", earlyFromStore},
	{"spread: lateness from the send's answer p99 (ms)", latenessOf(spreadPh, fromAck, p99)},
	{"spread: arrival after the pushed storeTimestamp p99 (ms)", latenessOf(spreadPh, fromPushed, p99)},
	{"herd: first arrival after the instant (ms)", herdOf(func(x *phaseResult) float64 { return x.HerdFirstMs })},
	{"herd: last arrival after the instant (ms)", herdOf(func(x *phaseResult) float64 { return x.HerdLastMs })},
	{"herd: early", herdOf(func(x *phaseResult) float64 { return float64(x.Early) })},
	{"herd: lost", herdOf(func(x *phaseResult) float64 { return float64(x.Lost) })},
	{"herd: lateness from the broker's store time p99 (ms)", latenessOf(herdPh, fromStore, p99)},
	{"herd: lateness from the broker's store time max (ms)", latenessOf(herdPh, fromStore, maxOf)},
	{"herd: send rate (msgs/s)", herdOf(func(x *phaseResult) float64 { return x.SendRate })},
	{"spread: broker side, visible - due, p99 at most (ms)", brokerOf(func(r report) *phaseResult { return r.Spread }, func(b *brokerLateness) float64 { return b.P99LeMs })},
	{"herd: broker side, all visible at most (ms) after the instant", brokerOf(func(r report) *phaseResult { return r.Herd }, func(b *brokerLateness) float64 { return b.MaxLeMs })},
	{"paced (the spread's levels, sends paced): lateness p50 (ms)", pacedOf(func(x *phaseResult) float64 { return x.Lateness.P50 })},
	{"paced: lateness p99 (ms)", pacedOf(func(x *phaseResult) float64 { return x.Lateness.P99 })},
	{"paced: lateness max (ms)", pacedOf(func(x *phaseResult) float64 { return x.Lateness.Max })},
	{"paced: lateness from the broker's store time p99 (ms)", latenessOf(pacedPh, fromStore, p99)},
	{"paced: early", pacedOf(func(x *phaseResult) float64 { return float64(x.Early) })},
	{"paced: lost", pacedOf(func(x *phaseResult) float64 { return float64(x.Lost) })},
	{"load average during paced, mean", pacedOf(func(x *phaseResult) float64 { return x.Load.Mean })},
	{"load average during spread, mean", spreadOf(func(x *phaseResult) float64 { return x.Load.Mean })},
	{"load average during herd, mean", herdOf(func(x *phaseResult) float64 { return x.Load.Mean })},
}

// readReports reads every *.json report in dir.
func readReports(dir string) ([]report, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no *.json report in %s", dir)
	}
	var reps []report
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// summarizeFolder prints the Markdown summary of the reports in dir.
func summarizeFolder(dir string, w io.Writer) error {
	reps, err := readReports(dir)
	if err != nil {
		return err
	}
	summarize(reps, w)
	return nil
}

// median of xs (sorted in place); the mean of the middle two for an even
// count.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// num formats a figure: integers with thousands separators, small values
// with one decimal.
func num(v float64) string {
	if v != float64(int64(v)) && v < 100 && v > -100 {
		return fmt.Sprintf("%.1f", v)
	}
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// summarize prints, for each metric, each system's median and range over
// its runs and the ratio of the first system's median to the second's
// (systems in the order hourglass first, then by name), then each run.
func summarize(reps []report, w io.Writer) {
	var systems []string
	flush := map[string]string{}
	for _, r := range reps {
		if !slices.Contains(systems, r.System) {
			systems = append(systems, r.System)
			flush[r.System] = r.Flush
		}
	}
	slices.SortFunc(systems, func(a, b string) int {
		if (a == "hourglass") != (b == "hourglass") {
			if a == "hourglass" {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	head := "| metric |"
	sep := "|---|"
	for _, s := range systems {
		head += fmt.Sprintf(" %s (%s flush): median [range] |", s, flush[s])
		sep += "---|"
	}
	if len(systems) == 2 {
		head += fmt.Sprintf(" %s / %s |", systems[0], systems[1])
		sep += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	for _, m := range metrics {
		row := "| " + m.name + " |"
		var meds []float64
		for _, s := range systems {
			var xs []float64
			for _, r := range reps {
				if v, ok := m.get(r); ok && r.System == s {
					xs = append(xs, v)
				}
			}
			if len(xs) == 0 {
				row += " – |"
				meds = append(meds, 0)
				continue
			}
			med := median(xs)
			meds = append(meds, med)
			row += fmt.Sprintf(" %s [%s – %s] (%d runs) |", num(med), num(xs[0]), num(xs[len(xs)-1]), len(xs))
		}
		if len(systems) == 2 {
			if meds[1] != 0 {
				row += fmt.Sprintf(" %.3g |", meds[0]/meds[1])
			} else {
				row += " – |"
			}
		}
		fmt.Fprintln(w, row)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| system | run | spread p50 / p99 / max ms | early | lost | herd first / last ms | herd early, lost | send rate spread / herd msgs/s | load mean spread / herd |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	slices.SortStableFunc(reps, func(a, b report) int { return a.Run - b.Run })
	for _, r := range reps {
		s, h := r.Spread, r.Herd
		if s == nil || h == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s / %s / %s | %d | %d | %s / %s | %d, %d | %s / %s | %.1f / %.1f |\n",
			r.System, r.Run, num(s.Lateness.P50), num(s.Lateness.P99), num(s.Lateness.Max), s.Early, s.Lost,
			num(h.HerdFirstMs), num(h.HerdLastMs), h.Early, h.Lost, num(s.SendRate), num(h.SendRate), s.Load.Mean, h.Load.Mean)
	}
}
