package engine

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
)

// Compaction forward: a message pending for months would pin its whole
// segment, and a few such messages spread over many segments would pin
// gigabytes of delivered data. When the only thing keeping an old segment
// is a few pending messages, retention copies them to the head of the log
// as moved records and the segment can go.
//
// A moved message keeps its identity: its ID, timers, overlay entry, key
// index entry and queue-index entries all keep using the original
// position. reloc maps that identity to the position of the current copy,
// and every read of a message record goes through readStored, which follows
// it. reloc holds only moved messages, and an entry goes when retention
// deletes the copy's segment.

// DefaultCompactMaxPending bounds how many pending messages retention
// moves to free one segment; a segment pinned by more is kept.
const DefaultCompactMaxPending = 10000

var errGone = errors.New("engine: message record no longer exists")

// readStored reads the message whose identity is pos, following a move.
// It returns errGone when retention removed it and another error when pos
// is not a message.
func (e *Engine) readStored(pos uint64) (*message.Stored, int, error) {
	return readStoredFrom(&e.mu, e.segs, e.clog, pos)
}

// readStoredFrom is readStored for a part given the engine's lock, the
// segment table and the log instead of the engine.
func readStoredFrom(mu *sync.Mutex, segs *segTable, log *commitlog.Log, pos uint64) (*message.Stored, int, error) {
	mu.Lock()
	phys := segs.physLocked(pos)
	mu.Unlock()
	return readStoredAt(log, phys)
}

// readStoredAt reads the message record (original or moved copy) at phys
// in log.
func readStoredAt(log *commitlog.Log, phys uint64) (*message.Stored, int, error) {
	if phys < uint64(log.Start()) {
		return nil, 0, errGone
	}
	rec, _, err := log.Read(commitlog.Pos(phys))
	if err != nil {
		return nil, 0, err
	}
	payload := rec.Payload
	switch rec.Type {
	case recMessage:
	case recMoved:
		if len(payload) < 8 {
			return nil, 0, errBadPayload
		}
		payload = payload[8:]
	default:
		return nil, 0, errBadPayload
	}
	s, err := message.Decode(payload)
	return s, len(payload), err
}

// applyMovedLocked records that the message orig now lives at newPos:
// the apply of a moved record, live (the compaction that wrote it) and in
// replay alike, over the two parts it changes.
func applyMovedLocked(segs *segTable, ovl *overlayState, orig, newPos uint64) {
	segs.movedLocked(orig, newPos)
	// The entry now belongs with the copy's segment: the old one goes.
	ovl.journalLocked(orig)
}

// movable is a message record found in a segment being compacted.
type movable struct {
	orig    uint64 // identity
	due     int64  // due time in the record
	payload []byte // message payload
}

// compact moves the pending messages of segment seg to the head of the log.
// It reports how many it moved; the segment is deleted by a later retain.
func (k *checkpointer) compact(seg commitlog.Segment) (int, error) {
	// Read the segment without the lock: it is sealed.
	var cands []movable
	stop := errors.New("stop")
	err := k.log.Scan(seg.Base, func(pos commitlog.Pos, rec commitlog.Record) error {
		if pos >= seg.End {
			return stop
		}
		var m movable
		switch rec.Type {
		case recMessage:
			m = movable{orig: uint64(pos), payload: rec.Payload}
		case recMoved:
			if len(rec.Payload) < 8 {
				return nil
			}
			m = movable{orig: binary.LittleEndian.Uint64(rec.Payload), payload: rec.Payload[8:]}
		default:
			return nil
		}
		s, err := message.Decode(m.payload)
		if err != nil {
			return nil
		}
		m.due = fireAt(s)
		cands = append(cands, m)
		return nil
	})
	if err != nil && err != stop {
		return 0, err
	}
	k.gate.RLock()
	defer k.gate.RUnlock()
	// The lock is held across the append so that nothing fires, is
	// cancelled or moves meanwhile; this runs once per old segment.
	k.mu.Lock()
	defer k.mu.Unlock()
	var recs []commitlog.Record
	var origs []uint64
	for _, m := range cands {
		if k.segs.physLocked(m.orig) < uint64(seg.Base) || k.segs.physLocked(m.orig) >= uint64(seg.End) {
			continue // a copy elsewhere is current
		}
		due := m.due
		if ov := k.ovl.get(m.orig); ov != nil {
			if ov.Cancelled || ov.Fired {
				continue
			}
			due = ov.Due
		}
		if !k.disp.waitingLocked(m.orig, due) {
			continue
		}
		b := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(m.payload)), m.orig)
		recs = append(recs, commitlog.Record{Type: recMoved, Payload: append(b, m.payload...)})
		origs = append(origs, m.orig)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	pos, err := k.log.Append(recs...)
	if err != nil {
		return 0, err
	}
	for i, o := range origs {
		applyMovedLocked(k.segs, k.ovl, o, uint64(pos[i]))
	}
	k.stats.Compacted.Add(uint64(len(recs)))
	return len(recs), nil
}
