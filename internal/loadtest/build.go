package loadtest

import (
	"fmt"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/benchreport"
)

// report builds the report of a finished run. Every producer and
// consumer must have stopped.
func (r *runner) report(ended string, finished time.Time) *Report {
	entries := r.rec.frozen()
	c := r.rec.snapshot()
	cfg := r.cfg
	rep := &Report{
		Version: ReportVersion, RunID: r.runID, Server: cfg.Server, Topic: r.topic, Group: cfg.Group, Mode: cfg.Mode,
		Settings: Settings{
			Messages: cfg.N, Producers: cfg.Producers, Rate: cfg.Rate, Batch: cfg.Batch, BodyBytes: cfg.BodyBytes,
			Consumers: cfg.Consumers, Max: cfg.Max, Invisible: cfg.Invisible.String(), Wait: cfg.Wait.String(),
			Deadline: cfg.Deadline.String(), Linger: cfg.Linger.String(), Seed: cfg.Seed,
		},
		Run: benchreport.NewRun(r.start, finished, ended),
	}
	for _, name := range r.seriesNames() {
		rep.Settings.Tiers = append(rep.Settings.Tiers, name)
	}
	if cfg.Mode == ModeSpread {
		rep.Settings.Spread = fmt.Sprintf("%s-%s", cfg.SpreadMin, cfg.SpreadMax)
		rep.Settings.Tiers = nil
	}
	if cfg.Mode == ModeHerd {
		rep.Settings.Tiers = nil
	}

	rep.Total = rowOf("all", entries, func(*entry) bool { return true })
	for k, name := range r.seriesNames() {
		tier := uint8(k)
		rep.Tiers = append(rep.Tiers, rowOf(name, entries, func(e *entry) bool { return e.tier == tier }))
	}

	rep.Sends = SendStats{
		Requests: int(r.sendReqs.Load()), FailedRequests: int(r.sendFailed.Load()), Refused: int(r.sendRefused.Load()), Resent: int(r.sendResent.Load()),
		Acked: c.acked, Unacknowledged: c.failed, RatePerS: rep.Total.SendRate,
	}
	for i := range entries {
		e := &entries[i]
		if e.state == benchreport.SendFailed && e.arrival != 0 {
			rep.Sends.UnacknowledgedDelivered++
		}
		if e.state == benchreport.SendAcked && e.sent > e.due {
			rep.Sends.SentAfterDue++
		}
	}
	rep.Receives = ReceiveStats{
		Requests: int(r.recvReqs.Load()), Errors: int(r.recvErrors.Load()), AckFailures: int(r.ackFailures.Load()),
		AcksCarriedAtEnd: int(r.acksCarriedAtEnd.Load()),
		Redelivered:      c.redelivered, Foreign: c.foreign, RatePerS: rep.Total.ReceiveRate,
	}

	if cfg.Mode == ModeHerd {
		rep.Herd = r.herdReport(entries, rep.Total)
	}
	if r.drill != nil {
		rep.Drill = r.drillReport(entries)
	}
	rep.verdict()
	return rep
}

// seriesNames names the rows: one per tier, or one for a spread or herd.
func (r *runner) seriesNames() []string {
	switch r.cfg.Mode {
	case ModeSpread:
		return []string{fmt.Sprintf("spread %s-%s", r.cfg.SpreadMin, r.cfg.SpreadMax)}
	case ModeHerd:
		return []string{"herd"}
	}
	names := make([]string, len(r.cfg.Tiers))
	for i, t := range r.cfg.Tiers {
		names[i] = shortDuration(t)
	}
	return names
}

// shortDuration is d.String() without zero trailing units: "5m", not
// "5m0s"; "1h30m", not "1h30m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// herdReport measures the herd from its instant.
func (r *runner) herdReport(entries []entry, total Row) *HerdReport {
	t := benchreport.Tally{HerdAt: r.herdAt * int64(time.Millisecond)}
	for i := range entries {
		t.Add(entries[i].message())
	}
	h := t.Herd(total, time.UnixMilli(r.herdAt))
	return &h
}

// drillReport describes the kills and splits the messages by whether
// they fell due while the broker was down.
func (r *runner) drillReport(entries []entry) *DrillReport {
	kills := r.drill.history()
	d := &DrillReport{
		Binary: r.drill.sup.binary, DataDir: r.drill.sup.dataDir, ServerArgs: r.drill.sup.extra,
		Downtime: r.cfg.Downtime.String(), WindowS: r.drill.window.Seconds(), Kills: []KillReport{},
	}
	var spans [][2]int64
	for _, k := range kills {
		kr := KillReport{KilledAt: k.killed, RestartedAt: k.restarted, ReadyAt: k.ready, AtS: k.killed.Sub(r.start).Seconds()}
		if !k.ready.IsZero() {
			kr.DownMs = benchreport.NsToMs(int64(k.ready.Sub(k.killed)))
			kr.RecoveryMs = benchreport.NsToMs(int64(k.ready.Sub(k.restarted)))
		}
		d.Kills = append(d.Kills, kr)
		end := k.ready
		if end.IsZero() {
			end = time.Now()
		}
		spans = append(spans, [2]int64{k.killed.UnixNano(), end.UnixNano()})
	}
	down := func(e *entry) bool {
		for _, s := range spans {
			if e.due >= s[0] && e.due <= s[1] {
				return true
			}
		}
		return false
	}
	d.DueWhileDown = rowOf("due while down", entries, down)
	d.DueWhileUp = rowOf("due while up", entries, func(e *entry) bool { return !down(e) })
	return d
}

// chart returns the chart of the run's arrivals.
func (r *runner) chart(rep *Report) chartData {
	entries := r.rec.frozen()
	start := r.start.UnixNano()
	d := chartData{
		title:  fmt.Sprintf("hourglass bench %s: lateness of %d messages by due time", r.runID, rep.Total.Sent),
		xTitle: "due time, since the start of the run",
		points: make([]chartPoint, 0, len(entries)),
	}
	for _, name := range r.seriesNames() {
		d.series = append(d.series, name)
	}
	// A herd's due times are all one instant, so its x axis is the
	// arrival time instead: the chart then shows how the herd drained.
	herd := r.cfg.Mode == ModeHerd
	if herd {
		d.title = fmt.Sprintf("hourglass bench %s: lateness of a herd of %d messages", r.runID, rep.Total.Sent)
		d.xTitle = fmt.Sprintf("arrival time, since the start of the run (all due at %.1fs)",
			float64(r.herdAt*int64(time.Millisecond)-start)/1e9)
	}
	for i := range entries {
		e := &entries[i]
		if e.arrival == 0 {
			continue
		}
		x := e.due
		if herd {
			x = e.arrival
		}
		d.points = append(d.points, chartPoint{x: float64(x-start) / 1e9, late: e.arrival - e.due, series: int(e.tier)})
	}
	if rep.Drill != nil {
		for _, k := range rep.Drill.Kills {
			end := k.ReadyAt
			if end.IsZero() {
				end = rep.Finished
			}
			d.down = append(d.down, [2]float64{k.KilledAt.Sub(r.start).Seconds(), end.Sub(r.start).Seconds()})
		}
	}
	return d
}
