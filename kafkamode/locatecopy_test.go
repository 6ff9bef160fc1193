package kafkamode

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIsForwardOfCopy: the forward of a message copied forward names the
// position the message was first sent at, not the copy's; findForward
// must take it for the copy's forward (else a delivered message reads as
// cancelled when inspect reaches it through its copy), but only when it
// carries the copy's key and value: a hourglass-copied-from header alone,
// which any producer can write, does not tie a record to another
// message's forward.
func TestIsForwardOfCopy(t *testing.T) {
	l := &Locator{cfg: Config{DelayTopic: "d"}}
	const due = 1_000
	orig := &kgo.Record{Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{
		{Key: HeaderDeliverAt, Value: strconv.AppendInt(nil, due, 10)}, {Key: HeaderBizTopic, Value: []byte("biz")}}}
	cp := copyRecord(orig, "d", 0, "d/0/3", due) // the copy at 40 of the message first sent at 3
	cp.Offset = 40
	fwd := forwardRecord(cp, "biz", "d/0/3", due) // what the worker forwards for it (Worker.output)
	loc := Location{Partition: 0, Offset: 40, Record: cp}
	if !l.isForwardOf(loc)(fwd) {
		t.Errorf("the forward of the copy at 40 (source d/0/3) is not taken for its forward")
	}
	other := forwardRecord(&kgo.Record{Key: []byte("k"), Value: []byte("other")}, "biz", "d/0/3", due)
	if l.isForwardOf(loc)(other) {
		t.Errorf("a forward naming d/0/3 with another value is taken for the copy's forward")
	}
	// A record that merely carries the header (a producer's, with another
	// value) is not tied to d/0/3's forward, only to its own.
	forged := &kgo.Record{Key: []byte("k"), Value: []byte("forged"), Offset: 41,
		Headers: []kgo.RecordHeader{{Key: HeaderCopiedFrom, Value: []byte("d/0/3")}}}
	floc := Location{Partition: 0, Offset: 41, Record: forged}
	if l.isForwardOf(floc)(fwd) {
		t.Errorf("the forward of d/0/3 is taken for the forward of a record that only names d/0/3 in a header")
	}
	if !l.isForwardOf(floc)(forwardRecord(forged, "biz", "d/0/41", due)) {
		t.Errorf("the forward naming the record's own position is not taken for its forward")
	}
	// A message that is not a copy: its own position only.
	mloc := Location{Partition: 0, Offset: 3, Record: orig}
	if !l.isForwardOf(mloc)(fwd) || l.isForwardOf(mloc)(forwardRecord(orig, "biz", "d/0/4", due)) {
		t.Errorf("a message's forward is not matched by its own position alone")
	}
}
