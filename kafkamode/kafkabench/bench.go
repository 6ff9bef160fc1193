package kafkabench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Result is one run of one system. Times are lateness at the consumer in
// ms: when a message arrived minus when it was due.
type Result struct {
	P50     int64 `json:"p50_ms"`
	P99     int64 `json:"p99_ms"`
	Max     int64 `json:"max_ms"`
	P99Warm int64 `json:"warm_p99_ms"`
	// AfterKillP99 and AfterKillMax are over the messages due from the
	// drill's kill on (0 without one).
	AfterKillP99 int64 `json:"after_kill_p99_ms"`
	AfterKillMax int64 `json:"after_kill_max_ms"`
	// Lost never arrived; Dup arrived more than once (every arrival past
	// the first, and any record the benchmark did not produce); Early
	// arrived before it was due.
	Lost  int `json:"lost"`
	Dup   int `json:"duplicated"`
	Early int `json:"early"`
	// Killed: a worker of this system was SIGKILLed in this run.
	Killed      bool    `json:"killed"`
	BytesPerMsg float64 `json:"bytes_written_per_message"`
	RSSMiB      float64 `json:"worker_peak_rss_mib"`
	// LoadStart and LoadEnd are the 1-minute load average at the run's
	// start and end (-1: unknown).
	LoadStart float64 `json:"load_start"`
	LoadEnd   float64 `json:"load_end"`
}

func (r Result) String() string {
	s := fmt.Sprintf("lateness p50 %d / p99 %d / max %d ms (warm p99 %d ms); early %d, lost %d, duplicated %d; %.0f B written per message; worker peak RSS %.0f MiB; load %.2f-%.2f",
		r.P50, r.P99, r.Max, r.P99Warm, r.Early, r.Lost, r.Dup, r.BytesPerMsg, r.RSSMiB, r.LoadStart, r.LoadEnd)
	if r.Killed {
		s += fmt.Sprintf("; after the kill p99 %d / max %d ms", r.AfterKillP99, r.AfterKillMax)
	}
	return s
}

// SystemReport is one system's runs.
type SystemReport struct {
	Name string   `json:"system"`
	Runs []Result `json:"runs"`
	// Bad is what -strict counts against it: lost and early always,
	// duplicates unless the system allows them (after a kill, or always).
	Bad int `json:"strict_failures"`
}

// Report is the whole benchmark, as -json writes it.
type Report struct {
	Brokers   string         `json:"brokers"`
	N         int            `json:"messages_per_run"`
	Tiers     []string       `json:"tiers"`
	ProduceIn string         `json:"produce_in"`
	Workers   int            `json:"workers"`
	Kill      bool           `json:"kill"`
	Systems   []SystemReport `json:"systems"`
	Passed    bool           `json:"strict_passed"`
}

// Main runs the benchmark with args (after "bench kafka") and returns the
// exit status: 0, 1 when it failed or -strict found a bad message, 2 for
// bad flags.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, opts Options) int {
	c, role, prefix, code, ok := parseConfig(args, stderr, opts)
	if !ok {
		return code
	}
	if role != "" {
		run := runFloor
		if role == "floor-alo" {
			run = runFloorALO
		}
		if err := run(ctx, c.Brokers, prefix); err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", opts.Name, role, err)
			return 1
		}
		return 0
	}
	rep, err := Run(ctx, &c, opts, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", opts.Name, err)
		return 1
	}
	rep.WriteSummary(stdout)
	if c.JSONPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(c.JSONPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(stderr, "%s: write -json: %v\n", opts.Name, err)
			return 1
		}
	}
	if c.Strict && !rep.Passed {
		return 1
	}
	return 0
}

// Run runs every system c.Runs times, one line per run on stdout, and
// returns the report. Worker output goes to log with KAFKABENCH_VERBOSE.
func Run(ctx context.Context, c *Config, opts Options, stdout, log io.Writer) (*Report, error) {
	rep := &Report{Brokers: c.Brokers, N: c.N, ProduceIn: c.ProduceIn.String(), Workers: c.Workers, Kill: c.Kill, Passed: true}
	for _, t := range c.Tiers {
		rep.Tiers = append(rep.Tiers, t.String())
	}
	for _, name := range c.Systems {
		rep.Systems = append(rep.Systems, SystemReport{Name: name})
	}
	for run := 1; run <= c.Runs; run++ {
		for i := range rep.Systems {
			sr := &rep.Systems[i]
			sys := opts.system(sr.Name)
			r, err := runOnce(ctx, c, opts, *sys, run, log)
			if err != nil {
				return nil, fmt.Errorf("%s run %d: %w", sr.Name, run, err)
			}
			fmt.Fprintf(stdout, "%s run %d: %s\n", sr.Name, run, r)
			sr.Runs = append(sr.Runs, r)
			sr.Bad += r.Lost + r.Early
			if !sys.DupAlways && !(sys.DupAfterCrash && r.Killed) {
				sr.Bad += r.Dup
			}
			if sr.Bad > 0 {
				rep.Passed = false
			}
		}
	}
	return rep, nil
}

// WriteSummary writes one row per system: each figure's median [range]
// over the runs.
func (rep *Report) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "\n%d messages a run over %s, tiers %s, %d worker(s)%s; lateness in ms, median [range] of %d run(s)\n",
		rep.N, rep.ProduceIn, strings.Join(rep.Tiers, ","), rep.Workers, map[bool]string{true: ", one killed at half"}[rep.Kill], len(rep.Systems[0].Runs))
	cols := []struct {
		head string
		f    func(Result) float64
	}{
		{"p50", func(r Result) float64 { return float64(r.P50) }},
		{"p99", func(r Result) float64 { return float64(r.P99) }},
		{"max", func(r Result) float64 { return float64(r.Max) }},
		{"warm-p99", func(r Result) float64 { return float64(r.P99Warm) }},
		{"lost", func(r Result) float64 { return float64(r.Lost) }},
		{"dup", func(r Result) float64 { return float64(r.Dup) }},
		{"early", func(r Result) float64 { return float64(r.Early) }},
		{"B/msg", func(r Result) float64 { return r.BytesPerMsg }},
		{"RSS-MiB", func(r Result) float64 { return r.RSSMiB }},
	}
	if rep.Kill {
		cols = append(cols, struct {
			head string
			f    func(Result) float64
		}{"after-kill-p99", func(r Result) float64 { return float64(r.AfterKillP99) }})
	}
	fmt.Fprintf(w, "%-14s", "system")
	for _, c := range cols {
		fmt.Fprintf(w, " %-16s", c.head)
	}
	fmt.Fprintf(w, " %s\n", "load")
	for _, s := range rep.Systems {
		fmt.Fprintf(w, "%-14s", s.Name)
		for _, c := range cols {
			fmt.Fprintf(w, " %-16s", medRange(s.Runs, c.f))
		}
		lo, hi := loadRange(s.Runs)
		fmt.Fprintf(w, " %.2f-%.2f\n", lo, hi)
	}
	if !rep.Passed {
		for _, s := range rep.Systems {
			if s.Bad > 0 {
				fmt.Fprintf(w, "STRICT: %s: %d message(s) lost, early, or duplicated where it promises none\n", s.Name, s.Bad)
			}
		}
	}
}

// medRange is the median [min-max] of f over rs.
func medRange(rs []Result, f func(Result) float64) string {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	return fmt.Sprintf("%.0f [%.0f-%.0f]", v[len(v)/2], v[0], v[len(v)-1])
}

// loadRange is the least and greatest load average seen at the runs'
// starts and ends.
func loadRange(rs []Result) (lo, hi float64) {
	lo, hi = -1, -1
	for _, r := range rs {
		for _, l := range []float64{r.LoadStart, r.LoadEnd} {
			if lo < 0 || l < lo {
				lo = l
			}
			hi = max(hi, l)
		}
	}
	return lo, hi
}
