package loadtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/benchreport"
)

// synthetic builds entries for report tests: due at base+i ms, sent one
// second before, arrival at due+late.
func synthetic() []entry {
	ms := int64(time.Millisecond)
	base := int64(1_700_000_000_000) * ms
	mk := func(i int, late int64, st benchreport.SendState, receipts uint32, tier uint8) entry {
		e := entry{due: base + int64(i)*ms, sent: base + int64(i)*ms - int64(time.Second), state: st, receipts: receipts, tier: tier}
		if receipts > 0 {
			e.arrival = e.due + late
			e.brokerVisible = e.due/ms + 1
		}
		return e
	}
	return []entry{
		mk(0, 2*ms, benchreport.SendAcked, 1, 0),
		mk(1, 4*ms, benchreport.SendAcked, 1, 0),
		mk(2, -ms/2, benchreport.SendAcked, 1, 0), // early by 0.5 ms
		mk(3, 0, benchreport.SendAcked, 0, 0),     // lost
		mk(4, 6*ms, benchreport.SendAcked, 3, 1),  // two extra deliveries
		mk(5, 0, benchreport.SendFailed, 0, 1),    // failed, never delivered: not lost
		mk(6, 8*ms, benchreport.SendFailed, 1, 1), // failed but delivered: not counted as sent
		mk(7, 10*ms, benchreport.SendAcked, 1, 1),
	}
}

func TestRowOf(t *testing.T) {
	es := synthetic()
	all := rowOf("all", es, func(*entry) bool { return true })
	if all.Sent != 6 || all.Received != 5 || all.Lost != 1 {
		t.Errorf("sent %d received %d lost %d, want 6, 5, 1", all.Sent, all.Received, all.Lost)
	}
	if all.Early != 1 || all.EarlyMaxMs != 0.5 {
		t.Errorf("early %d by up to %v ms, want 1 by 0.5", all.Early, all.EarlyMaxMs)
	}
	if all.Duplicated != 1 || all.ExtraDeliveries != 2 {
		t.Errorf("duplicated %d extra %d, want 1 and 2", all.Duplicated, all.ExtraDeliveries)
	}
	// Lateness covers every arrival, the unacknowledged one included:
	// -0.5, 2, 4, 6, 8, 10 ms.
	if l := all.Lateness; l.Count != 6 || l.Min != -0.5 || l.P50 != 4 || l.Max != 10 {
		t.Errorf("lateness %+v, want 6 values from -0.5 to 10 with p50 4", l)
	}
	tier1 := rowOf("5s", es, func(e *entry) bool { return e.tier == 1 })
	if tier1.Sent != 2 || tier1.Lost != 0 || tier1.Duplicated != 1 || tier1.Lateness.Count != 3 {
		t.Errorf("tier 1: %+v", tier1)
	}
	if tier1.BrokerLateness.Count != 3 {
		t.Errorf("broker lateness over %d values, want 3", tier1.BrokerLateness.Count)
	}
}

func TestVerdict(t *testing.T) {
	rep := &Report{Run: benchreport.Run{Ended: endAllArrived}, Settings: Settings{Messages: 6, Deadline: "30s"}}
	rep.Total = rowOf("all", synthetic(), func(*entry) bool { return true })
	rep.verdict()
	if rep.Passed || len(rep.Failures) != 2 {
		t.Fatalf("passed %v failures %q, want the lost and the early message", rep.Passed, rep.Failures)
	}
	if !strings.Contains(rep.Failures[0], "1 acknowledged messages lost") || !strings.Contains(rep.Failures[1], "1 messages arrived early") {
		t.Errorf("failures %q", rep.Failures)
	}

	ok := &Report{Run: benchreport.Run{Ended: endAllArrived}, Settings: Settings{Messages: 1}, Total: Row{Sent: 1, Received: 1}}
	ok.verdict()
	if !ok.Passed || len(ok.Failures) != 0 {
		t.Errorf("a clean run failed: %q", ok.Failures)
	}
	for _, ended := range []string{endInterrupted, "error: unauthenticated"} {
		r := &Report{Run: benchreport.Run{Ended: ended}, Settings: Settings{Messages: 1}, Total: Row{Sent: 1, Received: 1}}
		r.verdict()
		if r.Passed {
			t.Errorf("a run that ended with %q passed", ended)
		}
	}
}

// TestReportJSONShape pins the field names machines read.
func TestReportJSONShape(t *testing.T) {
	es := synthetic()
	rep := &Report{
		Version: ReportVersion, RunID: "r1", Mode: ModeTiers, Run: benchreport.Run{Ended: endDeadline},
		Settings: Settings{Messages: 6, Tiers: []string{"1s", "5s"}, Deadline: "30s"},
		Total:    rowOf("all", es, func(*entry) bool { return true }),
		Herd:     &HerdReport{Messages: 6},
		Drill:    &DrillReport{Kills: []KillReport{{AtS: 1.5, DownMs: 2000}}},
	}
	rep.Tiers = []Row{rowOf("1s", es, func(e *entry) bool { return e.tier == 0 })}
	rep.verdict()
	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.writeJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	get := func(path string) any {
		var v any = m
		for _, k := range strings.Split(path, ".") {
			switch c := v.(type) {
			case map[string]any:
				v = c[k]
			case []any:
				if len(c) == 0 {
					return nil
				}
				v = c[0].(map[string]any)[k]
			default:
				return nil
			}
		}
		return v
	}
	want := map[string]any{
		"version": float64(1), "run_id": "r1", "mode": "tiers", "ended": "deadline", "passed": false,
		"early_tolerance_ms": float64(0), "settings.messages": float64(6), "settings.deadline": "30s",
		"total.sent": float64(6), "total.lost": float64(1), "total.early": float64(1), "total.duplicated": float64(1),
		"total.lateness.p99_9_ms": float64(10), "total.lateness.p50_ms": float64(4), "tiers.name": "1s",
		"tiers.lost": float64(1), "herd.messages": float64(6), "drill.kills.down_ms": float64(2000),
	}
	for k, v := range want {
		if got := get(k); got != v {
			t.Errorf("%s = %v (%T), want %v", k, got, got, v)
		}
	}
	for _, k := range []string{"total.lateness.p95_ms", "total.lateness.p99_ms", "total.lateness.max_ms", "total.send_rate_per_s",
		"total.receive_rate_per_s", "sends.unacknowledged", "receives.ack_failures", "failures", "started", "finished"} {
		if get(k) == nil {
			t.Errorf("field %s is missing", k)
		}
	}
}

func TestTable(t *testing.T) {
	es := synthetic()
	rep := &Report{Mode: ModeTiers, Run: benchreport.Run{Ended: endDeadline}, Settings: Settings{Messages: 6, Tiers: []string{"1s", "5s"}, Deadline: "30s"}}
	rep.Total = rowOf("all", es, func(*entry) bool { return true })
	rep.Tiers = []Row{
		rowOf("1s", es, func(e *entry) bool { return e.tier == 0 }),
		rowOf("5s", es, func(e *entry) bool { return e.tier == 1 }),
		rowOf("30s", nil, func(*entry) bool { return true }),
	}
	rep.verdict()
	var out bytes.Buffer
	rep.writeTable(&out)
	text := out.String()
	for _, want := range []string{"p99.9 ms", "FAIL:", "lost", "0 ms tolerance"} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	// Row "1s": sent 4, received 3, lost 1, early 1, dup 0; the empty
	// tier shows dashes, not zeros, for lateness.
	var row1, row30 string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "1s" {
			row1 = line
		}
		if len(f) > 0 && f[0] == "30s" {
			row30 = line
		}
	}
	if f := strings.Fields(row1); len(f) < 6 || strings.Join(f[1:6], " ") != "4 3 1 1 0" {
		t.Errorf("row 1s = %q, want sent 4 received 3 lost 1 early 1 dup 0", row1)
	}
	if !strings.Contains(row30, " - ") {
		t.Errorf("row 30s = %q, want dashes for lateness", row30)
	}
	// Issue 30: no per-tier send rate (it repeated the run's), and every
	// receive rate stands beside the window it is over.
	var header []string
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "tier" {
			header = f
		}
	}
	if strings.Contains(text, "send/s") || len(header) < 4 || strings.Join(header[len(header)-4:], " ") != "arrivals over s recv/s" {
		t.Errorf("table header %q: want no send/s and recv/s after its window", header)
	}
	if !strings.Contains(text, "recv/s = a row's arrivals over its own window") {
		t.Error("the table does not say what recv/s is over")
	}
	if f := strings.Fields(row1); rep.Tiers[0].ReceiveSpanS <= 0 || f[len(f)-2] != fmt.Sprintf("%.2f", rep.Tiers[0].ReceiveSpanS) {
		t.Errorf("row 1s = %q, want its arrival window %.2f s", row1, rep.Tiers[0].ReceiveSpanS)
	}
}
