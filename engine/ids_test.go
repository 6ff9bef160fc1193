package engine

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// forgedFrame returns a commit-log frame of a message record, as a client
// could put it inside a body.
func forgedFrame(s *message.Stored) []byte {
	payload := message.Encode(nil, s)
	typed := append([]byte{byte(recMessage)}, payload...)
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(typed, crcTable))
	return append(b, typed...)
}

// TestForgedIDs embeds a record-shaped frame in a body and addresses it by
// position, the way a client that knows the ID scheme could. Every form of
// made-up ID must be NotFound and change nothing, and the broker must still
// restart (the review found a reschedule of such an ID panicking the broker
// on every start).
func TestForgedIDs(t *testing.T) {
	h := newHarness(t, nil)
	victim := h.send("victim", "order-1", message.When{Delay: 48 * time.Hour})
	fake := &message.Stored{Message: message.Message{Topic: "no-such-topic", Body: []byte("x")}, Due: 1, Sent: 1, Nonce: 42}
	frame := forgedFrame(fake)
	body := append(append([]byte("padding-"), frame...), "-tail"...)
	carrier, err := h.e.Send(t.Context(), message.Message{Topic: "attacker", Body: body}, message.When{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Find the forged frame's position: the carrier's record is at its
	// ID's position, and the frame lies inside its payload.
	rec, _, err := h.e.clog.Read(commitlog.Pos(carrier.ID.Pos))
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(rec.Payload, frame)
	if at < 0 {
		t.Fatal("forged frame not found in the carrier's payload")
	}
	forgedPos := carrier.ID.Pos + commitlog.FrameHeaderSize + uint64(at)
	// The premise: the log itself accepts the forged position as a record.
	if r, _, err := h.e.clog.Read(commitlog.Pos(forgedPos)); err != nil || r.Type != recMessage {
		t.Fatalf("the forged frame does not read as a record (%v): the test proves nothing", err)
	}
	forged := []message.ID{
		{Pos: forgedPos},                             // no tag
		{Pos: forgedPos, Tag: carrier.ID.Tag},        // a real tag of another message
		{Pos: forgedPos, Tag: victim.ID.Tag},         //
		{Pos: forgedPos + 1, Tag: 1},                 // inside the frame
		{Pos: victim.ID.Pos, Tag: victim.ID.Tag ^ 1}, // one bit off
		{Pos: victim.ID.Pos + 3, Tag: victim.ID.Tag}, // misaligned
		{Pos: 1 << 60, Tag: victim.ID.Tag},           // beyond the log
		{Pos: victim.ID.Pos, Tag: 0},                 // truncated
	}
	for _, id := range forged {
		if _, err := h.e.Inspect(id); !IsNotFound(err) {
			t.Errorf("Inspect(%s) = %v, want not_found", id, err)
		}
		if err := h.e.Cancel(t.Context(), id); !IsNotFound(err) {
			t.Errorf("Cancel(%s) = %v, want not_found", id, err)
		}
		if _, err := h.e.Reschedule(t.Context(), id, message.When{Delay: time.Minute}, 0); !IsNotFound(err) {
			t.Errorf("Reschedule(%s) = %v, want not_found", id, err)
		}
	}
	// Nothing changed, and a restart works.
	h.restart()
	if info, err := h.e.Inspect(victim.ID); err != nil || info.State != StatePending || info.Due != victim.Due {
		t.Fatalf("victim after the forgeries: %+v %v", info, err)
	}
	if info, err := h.e.InspectKey("victim", "order-1"); err != nil || info.ID != victim.ID {
		t.Fatalf("victim by key: %+v %v", info, err)
	}
	if p := h.e.Stats().Pending.Load(); p != 2 {
		t.Fatalf("pending = %d, want 2", p)
	}
}

// TestIDsDoNotAliasAfterLoss: under async flush a power loss drops
// acknowledged records and their positions are reused by later sends. The
// lost messages' IDs must then name nothing: a cancel of one must not
// cancel the new message that now lies at its position.
func TestIDsDoNotAliasAfterLoss(t *testing.T) {
	mem := vfs.NewMem()
	h := newHarness(t, func(o *Options) {
		o.FS = mem
		o.Flush = FlushAsync
		o.FlushInterval = time.Hour // nothing is synced by the ticker
	})
	base := h.send("t", "", message.When{Delay: time.Hour})
	if err := h.e.clog.Sync(); err != nil {
		t.Fatal(err)
	}
	lost := h.send("t", "k", message.When{Delay: time.Hour}) // acknowledged, not synced
	// Power loss: what was not synced is gone.
	img := mem.Crash(nil)
	h.e.Close()
	h.opt.FS = img
	h.open()
	if _, err := h.e.Inspect(base.ID); err != nil {
		t.Fatalf("the synced message was lost: %v", err)
	}
	if _, err := h.e.Inspect(lost.ID); !IsNotFound(err) {
		t.Fatalf("lost message: %v, want not_found", err)
	}
	reuse := h.send("t", "k", message.When{Delay: time.Hour})
	if reuse.ID.Pos != lost.ID.Pos {
		t.Fatalf("the new message is at %d, the lost one was at %d: the position was not reused, the test proves nothing", reuse.ID.Pos, lost.ID.Pos)
	}
	if reuse.ID == lost.ID {
		t.Fatal("the new message got the lost message's ID")
	}
	if err := h.e.Cancel(t.Context(), lost.ID); !IsNotFound(err) {
		t.Fatalf("cancel of the lost ID = %v, want not_found", err)
	}
	if info, err := h.e.Inspect(reuse.ID); err != nil || info.State != StatePending {
		t.Fatalf("the new message after a cancel of the lost ID: %+v %v", info, err)
	}
}

// flipTag returns receipt r with one bit of its tag changed: always
// another receipt. (Writing "AA" over its last two characters, as this
// test did, left about one receipt in 256 unchanged, and the test failed.)
func flipTag(t *testing.T, r string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(r)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestForeignReceipts: a receipt is sealed per group and per process; a
// made-up one, one of another group, or one of an earlier process is
// refused and acks nothing.
func TestForeignReceipts(t *testing.T) {
	h := newHarness(t, nil)
	h.send("t", "", message.When{})
	rs := h.receiveN("t", "g", 1, time.Minute)
	real := rs[0].Receipt
	q, off, seq, err := h.e.ids.decodeReceipt(h.e.cons.group("t", "g").id, real)
	if err != nil {
		t.Fatal(err)
	}
	forged := []string{
		h.e.ids.encodeReceipt(h.e.cons.group("t", "g").id+1, q, off, seq), // another group's key input
		h.e.ids.encodeReceipt(h.e.cons.group("t", "g").id, q, off, seq+1),
		flipTag(t, real), // its own, with one bit of its tag changed
	}
	for _, r := range forged {
		if err := h.e.Ack(t.Context(), "t", "g", r); errs.CodeOf(err) != errs.NotFound && errs.CodeOf(err) != errs.InvalidArgument {
			t.Errorf("Ack(%q) = %v, want not_found", r, err)
		}
	}
	h.restart()
	if err := h.e.Ack(t.Context(), "t", "g", real); !IsNotFound(err) {
		t.Fatalf("a receipt of the previous process: %v, want not_found", err)
	}
}
