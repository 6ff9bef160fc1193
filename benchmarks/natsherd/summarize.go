package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// herdResult is what summarize reads from a report: the fields that
// `hourglass bench --json` and this program's --json share.
type herdResult struct {
	Ended string `json:"ended"`
	Total struct {
		Sent           int `json:"sent"`
		Lost           int `json:"lost"`
		Early          int `json:"early"`
		Duplicated     int `json:"duplicated"`
		BrokerLateness struct {
			Max float64 `json:"max_ms"`
		} `json:"broker_lateness"`
	} `json:"total"`
	Herd *struct {
		SentAfterAt  int     `json:"sent_after_at"`
		FirstAfterMs float64 `json:"first_after_ms"`
		LastAfterMs  float64 `json:"last_after_ms"`
		DrainRate    float64 `json:"drain_rate_per_s"`
	} `json:"herd"`
}

// series is the runs of one configuration (one NAME).
type series struct {
	name                    string
	runs                    []string
	load                    []string
	first, last, drain      []float64
	brokerMax               []float64
	sentAfter               []float64
	sent, lost, early, dups int
}

// summarizeMain prints the Markdown summary of the reports in a folder.
func summarizeMain(args []string, w io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: natsherd summarize DIR")
		return 2
	}
	all, err := readSeries(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsherd summarize:", err)
		return 1
	}
	writeSummary(w, all)
	return 0
}

// readSeries reads every NAME-RUN.json of dir, grouped by NAME in name
// order, each with the load average of NAME-RUN.load when there is one.
func readSeries(dir string) ([]*series, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	byName := map[string]*series{}
	var out []*series
	for _, p := range paths {
		base := strings.TrimSuffix(filepath.Base(p), ".json")
		i := strings.LastIndexByte(base, '-')
		if i < 0 {
			continue
		}
		name, run := base[:i], base[i+1:]
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r herdResult
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if r.Herd == nil {
			return nil, fmt.Errorf("%s: not a herd report", p)
		}
		s := byName[name]
		if s == nil {
			s = &series{name: name}
			byName[name] = s
			out = append(out, s)
		}
		s.add(run, r)
		load := "?"
		if l, err := os.ReadFile(strings.TrimSuffix(p, ".json") + ".load"); err == nil {
			load = strings.TrimSpace(string(l))
		}
		s.load = append(s.load, load)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no NAME-RUN.json reports in %s", dir)
	}
	return out, nil
}

// add records one run's result.
func (s *series) add(run string, r herdResult) {
	s.runs = append(s.runs, run)
	s.first = append(s.first, r.Herd.FirstAfterMs)
	s.last = append(s.last, r.Herd.LastAfterMs)
	s.drain = append(s.drain, r.Herd.DrainRate)
	s.brokerMax = append(s.brokerMax, r.Total.BrokerLateness.Max)
	s.sentAfter = append(s.sentAfter, float64(r.Herd.SentAfterAt))
	s.sent += r.Total.Sent
	s.lost += r.Total.Lost
	s.early += r.Total.Early
	s.dups += r.Total.Duplicated
}

// median is the middle value (the mean of the two middle ones for an even
// count); it sorts a copy.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread renders "median (min–max)" of v, rounded to whole units.
func spread(v []float64) string {
	return fmt.Sprintf("%s (%s–%s)", num(median(v)), num(slices.Min(v)), num(slices.Max(v)))
}

// num renders v rounded to a whole number with thousands separators.
func num(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// writeSummary prints one table row per series and the ratios of every
// hourglass series' median last arrival to every NATS series'.
func writeSummary(w io.Writer, all []*series) {
	fmt.Fprintln(w, "| configuration | runs | load average at start | first arrival ms, median (range) | last arrival ms, median (range) | broker-side visible - due, max ms | sent after the instant | drain msg/s | sent / lost / early / dup (all runs) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, s := range all {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s / %d / %d / %d |\n", s.name, len(s.runs),
			strings.Join(s.load, ", "), spread(s.first), spread(s.last), spread(s.brokerMax), spread(s.sentAfter), spread(s.drain),
			num(float64(s.sent)), s.lost, s.early, s.dups)
	}
	fmt.Fprintln(w)
	for _, h := range all {
		if !strings.HasPrefix(h.name, "hourglass") {
			continue
		}
		for _, n := range all {
			if !strings.HasPrefix(n.name, "nats") {
				continue
			}
			if nl := median(n.last); nl > 0 {
				fmt.Fprintf(w, "- last arrival, %s / %s: %.2f\n", h.name, n.name, median(h.last)/nl)
			}
		}
	}
}
