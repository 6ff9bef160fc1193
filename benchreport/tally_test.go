package benchreport

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// TestTallyCountsEachCase adds one message per case the counters tell
// apart, so that each counter fires, and checks every figure of the row
// and of the herd's report.
func TestTallyCountsEachCase(t *testing.T) {
	at := int64(1_800_000_000_000) * ms
	tally := Tally{HerdAt: at}
	for _, m := range []Message{
		{State: SendAcked, Due: at, Sent: at - 5000*ms, Arrival: at + 5*ms, Visible: at + 4*ms, Receipts: 1}, // on time
		{State: SendAcked, Due: at, Sent: at - 5000*ms, Arrival: at - 2*ms, Receipts: 1},                     // early
		{State: SendAcked, Due: at, Sent: at - 5000*ms},                                                      // lost
		{State: SendAcked, Due: at, Sent: at - 4000*ms, Arrival: at + 10*ms, Receipts: 3},                    // duplicated twice
		{State: SendFailed, Due: at, Sent: at - 4000*ms, Arrival: at + 1*ms, Receipts: 1},                    // unacknowledged, arrived
		{State: SendFailed, Due: at, Sent: at - 4000*ms},                                                     // unacknowledged, never arrived
		{State: SendAcked, Due: at, Sent: at + 3*ms, Arrival: at + 20*ms, Visible: at + 2*ms, Receipts: 1},   // sent after the instant
	} {
		tally.Add(m)
	}
	row := tally.Row("herd")
	if row.Name != "herd" || row.Sent != 5 || row.Received != 4 || row.Lost != 1 {
		t.Errorf("name/sent/received/lost = %s/%d/%d/%d, want herd/5/4/1", row.Name, row.Sent, row.Received, row.Lost)
	}
	if row.Early != 1 || row.EarlyMaxMs != 2 || row.Duplicated != 1 || row.ExtraDeliveries != 2 {
		t.Errorf("early %d (max %v ms), duplicated %d, extra %d; want 1 (2), 1, 2", row.Early, row.EarlyMaxMs, row.Duplicated, row.ExtraDeliveries)
	}
	// Lateness covers every arrival, acknowledged or not: -2, 1, 5, 10, 20.
	if l := row.Lateness; l.Count != 5 || l.Min != -2 || l.P50 != 5 || l.P99 != 20 || l.Max != 20 || l.Mean != 6.8 {
		t.Errorf("lateness %+v", l)
	}
	if b := row.BrokerLateness; b.Count != 2 || b.Min != 2 || b.Max != 4 {
		t.Errorf("broker lateness %+v, want the two visible times, 2 and 4 ms", b)
	}
	// Arrivals span from -2 ms to +20 ms: 22 ms for 5 arrivals.
	if row.ReceiveSpanS != 0.022 || row.ReceiveRate != 227.3 {
		t.Errorf("receive span %v s, rate %v/s; want 0.022 s, 227.3/s", row.ReceiveSpanS, row.ReceiveRate)
	}
	h := tally.Herd(row, time.Unix(0, at))
	if h.Messages != 5 || h.SentAfterAt != 1 || h.AllArrived || h.FirstAfterMs != -2 || h.LastAfterMs != 20 || h.DrainRate != row.ReceiveRate {
		t.Errorf("herd %+v", h)
	}
}

// TestTallyEmpty: nothing added is a zero row, not a division by zero.
func TestTallyEmpty(t *testing.T) {
	var tally Tally
	row := tally.Row("none")
	if row != (Row{Name: "none"}) {
		t.Fatalf("empty tally: %+v", row)
	}
	if h := tally.Herd(row, time.Time{}); h.AllArrived || h.FirstAfterMs != 0 {
		t.Fatalf("empty herd: %+v", h)
	}
}

// TestStandardLibraryOnly: benchmarks/natsherd builds this package into
// its own module through a replace; an import beyond the standard library
// would bring the broker's dependencies into the baseline's build.
func TestStandardLibraryOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files: %v", err)
	}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s, which is not the standard library", f, p)
			}
		}
	}
}

// TestVerdict: a run passes only when it finished and nothing
// acknowledged was lost or early, and every message was acknowledged;
// each failure is named.
func TestVerdict(t *testing.T) {
	ok := Row{Sent: 10, Received: 10}
	for _, ended := range []string{EndAllArrived, EndDeadline} {
		if got := Verdict(ok, 10, ended, "30s"); len(got) != 0 {
			t.Errorf("a clean run that ended %q failed: %q", ended, got)
		}
	}
	bad := Row{Sent: 8, Received: 7, Lost: 1, Early: 2, EarlyMaxMs: 0.5}
	got := strings.Join(Verdict(bad, 10, "interrupted", "30s"), "; ")
	for _, want := range []string{"1 acknowledged messages lost (not received within 30s", "2 messages arrived early (up to 0.500 ms", "did not finish: interrupted", "only 8 of 10"} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict %q lacks %q", got, want)
		}
	}
}

// TestRunJSON: a report embedding Run carries its fields at the top level
// under the names summaries read, with the duration computed.
func TestRunJSON(t *testing.T) {
	start := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	b, err := json.Marshal(struct {
		Run
		Other int `json:"other"`
	}{Run: NewRun(start, start.Add(1500*time.Millisecond), EndDeadline)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"started":"2026-12-06T00:00:00Z"`, `"duration_s":1.5`, `"ended":"deadline"`, `"early_tolerance_ms":0`, `"other":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}
