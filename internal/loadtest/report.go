package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hourglass-mq/hourglass/benchreport"
)

// ReportVersion is the version of the JSON report's shape; it changes
// when a field is renamed or removed (adding fields does not change it).
const ReportVersion = 1

// Report is the outcome of a run: what the JSON file holds and what the
// table shows. Durations are milliseconds (…_ms) or seconds (…_s).
type Report struct {
	Version int    `json:"version"`
	RunID   string `json:"run_id"`
	Server  string `json:"server"`
	Topic   string `json:"topic"`
	Group   string `json:"group"`
	Mode    Mode   `json:"mode"`
	// Settings echoes the configuration that shaped the run.
	Settings Settings `json:"settings"`

	// Run is when the run started and finished and why it ended.
	benchreport.Run

	Sends    SendStats    `json:"sends"`
	Receives ReceiveStats `json:"receives"`

	// Total is over all messages; Tiers has one row per tier (one row
	// for a spread or a herd).
	Total Row   `json:"total"`
	Tiers []Row `json:"tiers"`

	Herd  *HerdReport  `json:"herd,omitempty"`
	Drill *DrillReport `json:"drill,omitempty"`

	// Passed is true when no message was lost or early and the run ended
	// normally; Failures lists why not.
	Passed   bool     `json:"passed"`
	Failures []string `json:"failures"`
}

// Settings are the knobs of a run, for the record.
type Settings struct {
	Messages  int      `json:"messages"`
	Tiers     []string `json:"tiers,omitempty"`
	Spread    string   `json:"spread,omitempty"`
	Producers int      `json:"producers"`
	Rate      float64  `json:"rate"`
	Batch     int      `json:"batch"`
	BodyBytes int      `json:"body_bytes"`
	Consumers int      `json:"consumers"`
	Max       int      `json:"max"`
	Invisible string   `json:"invisible"`
	Wait      string   `json:"wait"`
	Deadline  string   `json:"deadline"`
	Linger    string   `json:"linger"`
	Seed      uint64   `json:"seed"`
}

// SendStats describes the producer side.
type SendStats struct {
	// Requests is the number of send requests made. Refused counts those
	// the broker certainly did not act on (connection refused, 429, 503):
	// their messages were sent again under the same bench IDs.
	// FailedRequests counts the other failures (connection reset, timeout,
	// 500), after which the broker may or may not have stored the
	// messages.
	Requests       int `json:"requests"`
	Refused        int `json:"refused_requests"`
	FailedRequests int `json:"failed_requests"`
	// Resent counts the FailedRequests sent again with the same dedup IDs
	// and due times (--dedup): the broker stores each message at most
	// once, so their messages are acknowledged, not unacknowledged.
	Resent int `json:"resent_requests"`
	// Acked is the number of messages the broker acknowledged.
	Acked int `json:"acked"`
	// Unacknowledged is the number of messages of FailedRequests; they
	// were retried as new messages and are not counted as lost.
	Unacknowledged int `json:"unacknowledged"`
	// UnacknowledgedDelivered is how many of those arrived anyway (the
	// broker stored them but its answer was lost).
	UnacknowledgedDelivered int `json:"unacknowledged_delivered"`
	// SentAfterDue counts acknowledged messages whose send was answered
	// after their due time; their lateness includes send latency.
	SentAfterDue int `json:"sent_after_due"`
	// RatePerS is acknowledged messages per second while sending.
	RatePerS float64 `json:"rate_per_s"`
}

// ReceiveStats describes the consumer side.
type ReceiveStats struct {
	Requests int `json:"requests"`
	Errors   int `json:"errors"`
	// AckFailures is the number of messages whose ack failed; they come
	// back after the lease and count as duplicates.
	AckFailures int `json:"ack_failures"`
	// AcksCarriedAtEnd counts acks carried by a receive the end of the run
	// cut short, which the broker had made already (ackAfterCarry).
	AcksCarriedAtEnd int `json:"acks_carried_at_end"`
	// Redelivered counts deliveries the broker marked as attempt > 1.
	Redelivered int `json:"redelivered"`
	// Foreign counts messages received that this run did not send.
	Foreign int `json:"foreign"`
	// RatePerS is first arrivals per second while receiving.
	RatePerS float64 `json:"rate_per_s"`
}

// Row, Lateness and HerdReport are the shared result definitions of
// package benchreport, which benchmarks/natsherd measures with too.
type (
	Row        = benchreport.Row
	Lateness   = benchreport.Lateness
	HerdReport = benchreport.HerdReport
)

// DrillReport is the crash drill's result.
type DrillReport struct {
	Binary     string   `json:"binary"`
	DataDir    string   `json:"data_dir"`
	ServerArgs []string `json:"server_args"`
	Downtime   string   `json:"downtime"`
	// WindowS is the span over which the kills were spread.
	WindowS float64      `json:"window_s"`
	Kills   []KillReport `json:"kills"`
	// DueWhileDown covers messages whose due time fell while the broker
	// was down (from a kill until the restarted broker answered its
	// health check); DueWhileUp the others.
	DueWhileDown Row `json:"due_while_down"`
	DueWhileUp   Row `json:"due_while_up"`
}

// KillReport is one kill and restart.
type KillReport struct {
	KilledAt    time.Time `json:"killed_at"`
	RestartedAt time.Time `json:"restarted_at"`
	ReadyAt     time.Time `json:"ready_at"`
	// AtS is the kill's time since the run started.
	AtS float64 `json:"at_s"`
	// DownMs is from the kill until the broker answered again;
	// RecoveryMs from the restart until it answered.
	DownMs     float64 `json:"down_ms"`
	RecoveryMs float64 `json:"recovery_ms"`
}

// rowOf computes a Row over the entries that pass keep.
func rowOf(name string, entries []entry, keep func(*entry) bool) Row {
	var t benchreport.Tally
	for i := range entries {
		if e := &entries[i]; keep(e) {
			t.Add(e.message())
		}
	}
	return t.Row(name)
}

// message is what the shared tally needs of e.
func (e *entry) message() benchreport.Message {
	m := benchreport.Message{State: e.state, Sent: e.sent, Due: e.due, Arrival: e.arrival, Receipts: e.receipts}
	if e.brokerVisible != 0 {
		m.Visible = e.brokerVisible * 1e6 // the broker reports Unix ms
	}
	return m
}

// verdict fills Passed and Failures from the totals.
func (r *Report) verdict() {
	r.Failures = benchreport.Verdict(r.Total, r.Settings.Messages, r.Ended, r.Settings.Deadline)
	r.Passed = len(r.Failures) == 0
}

// writeJSON writes the report to path, indented.
func (r *Report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeTable writes the human report.
func (r *Report) writeTable(w io.Writer) {
	s := r.Settings
	what := strings.Join(s.Tiers, ",")
	switch r.Mode {
	case ModeSpread:
		what = "delays uniform in " + s.Spread
	case ModeHerd:
		what = "herd"
	default:
		what = "tiers " + what
	}
	fmt.Fprintf(w, "hourglass bench: %d messages, %s, topic %s, group %s\n", s.Messages, what, r.Topic, r.Group)
	rateText := "as fast as possible"
	if s.Rate > 0 {
		rateText = fmt.Sprintf("%.0f msg/s", s.Rate)
	}
	fmt.Fprintf(w, "  %d producers, batch %d, %s, %d B bodies; %d consumers, max %d, lease %s\n",
		s.Producers, s.Batch, rateText, s.BodyBytes, s.Consumers, s.Max, s.Invisible)
	fmt.Fprintf(w, "  server %s, run %s, ended: %s after %s\n\n", r.Server, r.RunID, r.Ended,
		time.Duration(r.DurationS*float64(time.Second)).Round(time.Millisecond))

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tier\tsent\treceived\tlost\tearly\tdup\tp50 ms\tp95 ms\tp99 ms\tp99.9 ms\tmax ms\tarrivals over s\trecv/s\t")
	rows := append([]Row(nil), r.Tiers...)
	if len(rows) > 1 {
		rows = append(rows, r.Total)
	}
	if r.Drill != nil {
		rows = append(rows, r.Drill.DueWhileUp, r.Drill.DueWhileDown)
	}
	for _, row := range rows {
		l := row.Lateness
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.0f\t\n", row.Name, row.Sent, row.Received,
			row.Lost, row.Early, row.Duplicated, msCell(l, l.P50), msCell(l, l.P95), msCell(l, l.P99), msCell(l, l.P999),
			msCell(l, l.Max), row.ReceiveSpanS, row.ReceiveRate)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "lateness = arrival at the consumer - intended due time; broker-side p50/p99/max (visible - due, ms resolution): %s/%s/%s ms\n",
		msCell(r.Total.BrokerLateness, r.Total.BrokerLateness.P50), msCell(r.Total.BrokerLateness, r.Total.BrokerLateness.P99),
		msCell(r.Total.BrokerLateness, r.Total.BrokerLateness.Max))
	fmt.Fprintf(w, "early = arrived before the due time, with %g ms tolerance (the bench and the broker must share a clock)\n", r.EarlyToleranceMs)
	fmt.Fprintln(w, "recv/s = a row's arrivals over its own window, first to last arrival (arrivals over s); the tiers' windows overlap and the all row's spans them, so rates of different rows are not parts of one total. The send rate is one figure for the run (sends, below)")
	fmt.Fprintf(w, "sends: %d requests, %d refused (retried), %d failed (%d resent with their dedup IDs; %d messages unacknowledged and resent as new ones, %d of them delivered anyway), %d answered after due, %.0f msg/s\n",
		r.Sends.Requests, r.Sends.Refused, r.Sends.FailedRequests, r.Sends.Resent, r.Sends.Unacknowledged, r.Sends.UnacknowledgedDelivered, r.Sends.SentAfterDue, r.Sends.RatePerS)
	fmt.Fprintf(w, "receives: %d requests, %d errors, %d ack failures (%d acks carried by a receive the run's end cut short, already made), %d redeliveries, %d foreign, %.0f msg/s\n",
		r.Receives.Requests, r.Receives.Errors, r.Receives.AckFailures, r.Receives.AcksCarriedAtEnd, r.Receives.Redelivered, r.Receives.Foreign, r.Receives.RatePerS)
	if h := r.Herd; h != nil {
		all := "all arrived"
		if !h.AllArrived {
			all = "NOT all arrived; last arrival"
		}
		fmt.Fprintf(w, "herd: %d messages due at %s (%d sent after it): first arrival %.1f ms after, %s %.1f ms after, drained at %.0f msg/s\n",
			h.Messages, h.At.UTC().Format(time.RFC3339Nano), h.SentAfterAt, h.FirstAfterMs, all, h.LastAfterMs, h.DrainRate)
	}
	if d := r.Drill; d != nil {
		fmt.Fprintf(w, "drill: %d kills over %.0f s, downtime %s, data dir %s\n", len(d.Kills), d.WindowS, d.Downtime, d.DataDir)
		for i, k := range d.Kills {
			fmt.Fprintf(w, "  kill %d at +%.1f s: down %.0f ms, recovery after restart %.0f ms\n", i+1, k.AtS, k.DownMs, k.RecoveryMs)
		}
	}
	if r.Passed {
		fmt.Fprintln(w, "PASS: no acknowledged message lost, none early")
	} else {
		fmt.Fprintln(w, "FAIL: "+strings.Join(r.Failures, "; "))
	}
}

// msCell renders a lateness value, or "-" when nothing was observed.
func msCell(l Lateness, v float64) string {
	if l.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}
