package engine

import (
	"fmt"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/queueindex"
)

// Reading a receive's batch. A handout of up to MaxReceive messages used
// to cost, per message, a queue-index read, a lock of mu to find the
// record's copy, and a commit-log read into a fresh 4 KiB buffer: under a
// herd that was a third of the broker's CPU (a profile of hourglass bench
// --herd). Here the queue entries of consecutive offsets are read in one
// call, the copies are looked up under one lock, and the records are read
// through commitlog.ReadEach, which serves records written close together
// (a herd sent in batches) from one read without copying payloads, and
// decoded into one message.Arena.

// handoutEntries reads the queue entries of hs, in the order of hs: one
// queueindex.Read per run of consecutive offsets of one queue.
func handoutEntries(t *topic, hs []handout) ([]queueindex.Entry, error) {
	out := make([]queueindex.Entry, 0, len(hs))
	for i := 0; i < len(hs); {
		h := hs[i]
		j := i + 1
		for j < len(hs) && hs[j].queue == h.queue && hs[j].n == h.n && hs[j].offset == h.offset+uint64(j-i) {
			j++
		}
		en, err := t.queues[h.queue].Read(h.offset, j-i, h.n)
		if err == nil && len(en) != j-i {
			err = fmt.Errorf("queue entries [%d, %d) are missing", h.offset+uint64(len(en)), h.offset+uint64(j-i))
		}
		if err != nil {
			return nil, fmt.Errorf("queue %d offset %d: %w", h.queue, h.offset, err)
		}
		out = append(out, en...)
		i = j
	}
	return out, nil
}

// readStoredEach reads the message records of the identities pos (log
// positions of messages, as in queue entries) like readStored does for
// one: stored[i] is the message at pos[i], or nil if retention removed its
// record (errGone for readStored) or it is damaged: then damaged[i] holds
// the validation error (commitlog.DamagedAt). err is a read error (which
// may pass) or a record that validates but does not decode.
func (c *consumers) readStoredEach(pos []uint64) (stored []*message.Stored, damaged map[int]error, err error) {
	stored = make([]*message.Stored, len(pos))
	phys := make([]commitlog.Pos, 0, len(pos))
	at := make([]int, 0, len(pos)) // index in pos of each phys
	start := uint64(c.log.Start())
	c.mu.Lock()
	for i, p := range pos {
		if ph := c.segs.physLocked(p); ph >= start {
			phys = append(phys, commitlog.Pos(ph))
			at = append(at, i)
		}
	}
	c.mu.Unlock()
	// The batch is handed out together: its messages share an arena.
	var arena message.Arena
	arena.Reserve(len(phys))
	for {
		err = c.log.ReadEach(phys, func(k int, rec commitlog.Record) error {
			payload := rec.Payload
			switch rec.Type {
			case recMessage:
			case recMoved:
				if len(payload) < 8 {
					return errBadPayload
				}
				payload = payload[8:]
			default:
				return errBadPayload
			}
			// Decode copies what it keeps: the payload is ReadEach's buffer.
			s, err := arena.Decode(payload)
			if err != nil {
				return fmt.Errorf("message record at %d: %w", phys[k], err)
			}
			stored[at[k]] = s
			return nil
		})
		bad, ok := commitlog.DamagedAt(err)
		if !ok {
			return stored, damaged, err
		}
		// ReadEach went in position order and stopped at bad: read on
		// past it, the positions before it are decoded.
		if damaged == nil {
			damaged = map[int]error{}
		}
		n := 0
		for k, p := range phys {
			switch {
			case p == bad:
				damaged[at[k]] = err
			case p > bad:
				phys[n], at[n] = p, at[k]
				n++
			}
		}
		if n == len(phys) {
			return stored, damaged, err // not one of ours: cannot happen
		}
		phys, at = phys[:n], at[:n]
	}
}
