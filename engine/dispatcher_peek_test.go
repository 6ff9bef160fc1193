package engine

// Test views of the dispatcher's state, for tests of other parts that
// must wait for, or set up, a state of the dispatcher. Each expects mu
// held.

// inflightHas reports whether pos is in the fire record being written.
func (d *dispatcher) inflightHas(pos uint64) bool {
	for _, fe := range d.inflight {
		if fe.pos == pos {
			return true
		}
	}
	return false
}

// holds reports whether the message at pos is in the wheel or staged.
func (d *dispatcher) holds(pos uint64) bool { return d.near.has(pos) }

// leaseWheelTime is how far the lease wheel has run.
func (d *dispatcher) leaseWheelTime() int64 { return d.leaseAt }

// loadedPast reports whether the buckets are loaded past t, no load in
// progress.
func (d *dispatcher) loadedPast(t int64) bool { return d.loadedUntil > t && d.load == nil }

// setLoadedUntil sets how far the buckets count as loaded and returns
// what it was, for a test that asks what a state would be then.
func (d *dispatcher) setLoadedUntil(t int64) int64 {
	was := d.loadedUntil
	d.loadedUntil = t
	return was
}

// leaseWheel is how far the lease wheel has run, and whether its last
// advance stopped on its budget with timers still to expire.
func (d *dispatcher) leaseWheel() (at int64, busy bool) { return d.leaseAt, d.leasing }
