package engine

// Another topic's message during a rate-bound herd. When the herd has
// spent the rate's bucket, the loop sleeps until the tokens for its next
// batch accrue: a full DispatchBatch, up to 20 ms at the default rate. A
// message of another topic that fell due meanwhile waited for that, and
// the loop did not even wake at its due time, since the herd's earlier
// due time stood for the whole due set. Now the loop wakes when any
// topic's first staged message falls due (nextAfter), and while several
// topics have messages due it waits only for the tokens of a small batch
// (tokenWantLocked), which batchSizeLocked then shares among the topics
// in turn. The rate is unchanged: only how the tokens are cut into fire
// records while topics share them.

// nextAfter returns the earliest due time after now among the topics'
// first entries: when the next topic becomes ready. A topic already
// ready (its first entry due at or before now) does not count; its later
// entries matter only once it has fired what is due.
func (d *dueSet) nextAfter(now int64) (int64, bool) {
	next, ok := int64(0), false
	for _, t := range d.active {
		if due := d.byTopic[t].first().due; due > now && (!ok || due < next) {
			next, ok = due, true
		}
	}
	return next, ok
}

// tokenWantLocked is how many tokens make a fire batch worth waking for:
// a full batch (or all that is due) while one topic has messages due; at
// most firstBatch while several have, so that a message of another topic
// waits for no more than firstBatch tokens (1.3 ms at the default rate)
// and the fire in flight, where it waited for a full batch's tokens.
func (d *dispatcher) tokenWantLocked(now int64) int {
	want := min(d.opts.DispatchBatch, d.due.len())
	if d.due.readyTopics(now) > 1 {
		want = min(want, firstBatch)
	}
	return want
}
