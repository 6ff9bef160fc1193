package engine

// Release ends the leases of receipts whose messages never reached a
// consumer (a stream that could not write them, or had them leased ahead
// of its consumer when it ended): each message is ready for its group
// again at once, with no backoff, and its attempt count is what it was
// before the lease, so a message no consumer saw is never dead-lettered
// for it. Nothing is written: the lease's attempt record stays in the log,
// and recovery keeps the highest attempt of a message. So a crash before
// the next checkpoint brings the released lease's attempt back (one more
// than Release left; as if the lease had ended on its own), and otherwise
// the next delivery writes the same attempt again. Receipts that are malformed, of another group,
// or whose lease has ended are skipped: there is nothing to give back.
// Release returns how many leases it ended.
func (e *Engine) Release(topic, group string, receipts []string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.life.unavailableLocked() != nil {
		return 0
	}
	g := e.cons.group(topic, group)
	if g == nil {
		return 0
	}
	n := 0
	for _, r := range receipts {
		q, off, seq, err := e.ids.decodeReceipt(g.id, r)
		if err != nil || int(q) >= len(g.queues) {
			continue
		}
		gq := g.queues[q]
		l := gq.leaseOf(off)
		if l == nil || l.seq != seq {
			continue
		}
		if e.cons.takeBackLocked(g, handout{queue: q, offset: off, attempt: l.attempt, seq: seq}) {
			gq.ready = append(gq.ready, off)
			n++
		}
	}
	if n > 0 {
		e.life.notifyVisibleLocked()
	}
	return n
}
