package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/benchreport"
)

const ms = int64(time.Millisecond)

// TestMeasureMapsEntries: measure hands benchreport's tally what each
// entry means (the definitions and their cases are tested there): the
// publish's outcome, and the stream time of the fired copy as the moment
// it became visible; the verdict reads the row.
func TestMeasureMapsEntries(t *testing.T) {
	at := int64(1_800_000_000_000) * ms
	entries := []entry{
		{due: at, sent: at - 5000*ms, arrival: at + 5*ms, stored: at + 2*ms, receipts: 2, state: benchreport.SendAcked},
		{due: at, sent: at + 3*ms, state: benchreport.SendAcked},                                      // lost, sent after the instant
		{due: at, sent: at - 4000*ms, arrival: at - 1*ms, receipts: 1, state: benchreport.SendFailed}, // early, unacknowledged
	}
	row, h := measure(entries, at)
	if row.Name != "herd" || row.Sent != 2 || row.Lost != 1 || row.Early != 1 || row.Duplicated != 1 {
		t.Errorf("row %+v", row)
	}
	if b := row.BrokerLateness; b.Count != 1 || b.Max != 2 {
		t.Errorf("broker lateness %+v, want the one stored time, 2 ms after due", b)
	}
	if !h.At.Equal(time.Unix(0, at)) || h.SentAfterAt != 1 || h.FirstAfterMs != -1 || h.LastAfterMs != 5 {
		t.Errorf("herd %+v", h)
	}
	if got := verdict(row, 3, "deadline", "30s"); len(got) != 3 {
		t.Errorf("verdict %q, want lost, early and too few acknowledged", got)
	}
}

// TestRecorder checks the live counters: an arrival before its PubAck, a
// redelivery, a foreign message, and completion.
func TestRecorder(t *testing.T) {
	r := newRecorder(3, 100*ms)
	r.sent(0, true, 50*ms)
	r.arrive(1, 101*ms, 100*ms+ms/2, 1) // before its PubAck
	if r.complete() {
		t.Fatal("complete with message 0 acknowledged and not arrived")
	}
	r.sent(1, true, 102*ms)
	r.arrive(0, 103*ms, 102*ms, 1)
	r.arrive(0, 130*ms, 102*ms, 2) // a redelivery: a duplicate
	r.arrive(7, 104*ms, 0, 1)      // not of this run
	r.sent(2, false, 60*ms)
	if !r.complete() {
		t.Error("not complete with both acknowledged messages arrived")
	}
	if r.redelivered != 1 || r.foreign != 1 {
		t.Errorf("redelivered %d, foreign %d, want 1, 1", r.redelivered, r.foreign)
	}
	row, h := measure(r.frozen(), 100*ms)
	if row.Sent != 2 || row.Lost != 0 || row.Duplicated != 1 || row.Early != 0 || h.SentAfterAt != 1 || !h.AllArrived {
		t.Errorf("row %+v herd %+v", row, h)
	}
	if e := r.frozen()[0]; e.arrival != 103*ms {
		t.Errorf("arrival %d, want the first delivery's %d", e.arrival, 103*ms)
	}
	if b := row.BrokerLateness; b.Count != 2 || b.Min != 0.5 || b.Max != 2 {
		t.Errorf("broker-side lateness %+v, want 0.5 and 2 ms", b)
	}
}

// TestSummarize reads reports of two configurations and checks the
// medians, ranges, load averages and the ratio.
func TestSummarize(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, first, last float64, lost int) {
		body := `{"ended":"all arrived","total":{"sent":10,"lost":` + itoa(lost) + `,"early":0,"duplicated":0,"broker_lateness":{"max_ms":` + ftoa(last/2) + `}},` +
			`"herd":{"sent_after_at":0,"first_after_ms":` + ftoa(first) + `,"last_after_ms":` + ftoa(last) + `,"drain_rate_per_s":1000}}`
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("hourglass-default-1", 10, 400, 0)
	write("hourglass-default-2", 30, 200, 0)
	write("hourglass-default-3", 20, 300, 1)
	write("nats-default-1", 5, 100, 0)
	write("nats-default-2", 6, 150, 0)
	write("nats-default-3", 7, 125, 0)
	if err := os.WriteFile(filepath.Join(dir, "nats-default-2.load"), []byte("3.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := summarizeMain([]string{dir}, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"| hourglass-default | 3 | ?, ?, ? | 20 (10–30) | 300 (200–400) | 150 (100–200) |",
		"| 30 / 1 / 0 / 0 |",
		"| nats-default | 3 | ?, 3.21, ? | 6 (5–7) | 125 (100–150) |",
		"last arrival, hourglass-default / nats-default: 2.40",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func itoa(v int) string     { return strconv.Itoa(v) }
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
