package kafkamode_test

import (
	"fmt"
	"sort"
	"testing"
)

// ledger is the oracle of the end-to-end tests: what was scheduled (message
// ID and due time) against what a read_committed consumer received (ID,
// due header, arrival). check counts the three failures that matter.
type ledger struct {
	due map[string]int64 // ID -> due, Unix ms
}

// arrival is one record as the consumer saw it.
type arrival struct {
	id      string
	dueHdr  int64 // the hourglass-due-ms header
	at      int64 // when the consumer got it, Unix ms
	stamped int64 // the forwarded record's timestamp (produce time), Unix ms
}

type verdict struct {
	lost, duplicated, early, wrongDue, unknown int
	lateness                                   []int64 // arrival - due, per first arrival
	examples                                   []string
}

func (v verdict) String() string {
	return fmt.Sprintf("lost %d, duplicated %d, early %d, wrong due header %d, unknown %d; e.g. %v",
		v.lost, v.duplicated, v.early, v.wrongDue, v.unknown, v.examples)
}

func (v *verdict) example(format string, args ...any) {
	if len(v.examples) < 5 {
		v.examples = append(v.examples, fmt.Sprintf(format, args...))
	}
}

// latenessSummary is "p50/p99/max ms" of the lateness.
func (v verdict) latenessSummary() string {
	if len(v.lateness) == 0 {
		return "none"
	}
	q := func(f float64) int64 { return v.lateness[int(f*float64(len(v.lateness)-1))] }
	return fmt.Sprintf("p50 %d / p99 %d / max %d ms over %d", q(0.5), q(0.99), v.lateness[len(v.lateness)-1], len(v.lateness))
}

// ok reports whether nothing was lost, duplicated, early or wrong.
func (v verdict) ok() bool {
	return v.lost == 0 && v.duplicated == 0 && v.early == 0 && v.wrongDue == 0 && v.unknown == 0
}

func (l *ledger) check(got []arrival) verdict {
	var v verdict
	seen := make(map[string]int)
	for _, a := range got {
		due, ok := l.due[a.id]
		if !ok {
			v.unknown++
			v.example("unknown %s", a.id)
			continue
		}
		seen[a.id]++
		if seen[a.id] > 1 {
			v.duplicated++
			v.example("duplicate %s", a.id)
			continue
		}
		if a.dueHdr != due {
			v.wrongDue++
			v.example("%s: due header %d, scheduled %d", a.id, a.dueHdr, due)
		}
		if a.at < due || a.stamped < due {
			v.early++
			v.example("%s early: arrived %d, forwarded %d, due %d", a.id, a.at, a.stamped, due)
		}
		v.lateness = append(v.lateness, a.at-due)
	}
	for id := range l.due {
		if seen[id] == 0 {
			v.lost++
			v.example("lost %s", id)
		}
	}
	sort.Slice(v.lateness, func(i, j int) bool { return v.lateness[i] < v.lateness[j] })
	return v
}

// TestLedgerCounts makes each counter of the checker fire, so a test that
// passes because the checker is blind is caught.
func TestLedgerCounts(t *testing.T) {
	l := &ledger{due: map[string]int64{"a": 100, "b": 200, "c": 300, "d": 400}}
	v := l.check([]arrival{
		{id: "a", dueHdr: 100, at: 105, stamped: 101}, // fine
		{id: "a", dueHdr: 100, at: 106, stamped: 101}, // duplicate
		{id: "b", dueHdr: 200, at: 199, stamped: 200}, // early at the consumer
		{id: "c", dueHdr: 301, at: 310, stamped: 305}, // wrong due header
		{id: "z", dueHdr: 1, at: 2, stamped: 2},       // unknown
		// d is lost
	})
	if v.lost != 1 || v.duplicated != 1 || v.early != 1 || v.wrongDue != 1 || v.unknown != 1 || v.ok() {
		t.Fatalf("checker: %s", v)
	}
	v = l.check([]arrival{{id: "d", dueHdr: 400, at: 400, stamped: 399}})
	if v.early != 1 {
		t.Fatalf("a record stamped before its due time must count as early: %s", v)
	}
	all := []arrival{
		{id: "a", dueHdr: 100, at: 100, stamped: 100},
		{id: "b", dueHdr: 200, at: 210, stamped: 205},
		{id: "c", dueHdr: 300, at: 300, stamped: 300},
		{id: "d", dueHdr: 400, at: 401, stamped: 400},
	}
	if v = l.check(all); !v.ok() || len(v.lateness) != 4 || v.lateness[3] != 10 {
		t.Fatalf("clean run flagged: %s, lateness %v", v, v.lateness)
	}
}
