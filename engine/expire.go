package engine

// Deadlines. A message may carry a deadline (message.When.Deadline or
// TTL, stored in its record as Stored.Deadline): delivered no later than
// then, or not at all. The check is made where a message reaches a
// consumer, when a consumer group hands it out (deliver reads the record
// anyway): one handed out after its deadline goes to the group's
// dead-letter topic with the property hourglass-dead-reason=expired
// instead, through the same durable path as a message out of attempts
// (the dead-letter copy and the group's ack in one append), and the
// consumer never sees it. So a message whose fire came after its deadline
// (a long downtime, a herd spread past it) and one that waited in a
// group's backlog past it are treated alike, per group; a crash before the
// move hands the message out again after the restart, where it is found
// expired again. Expirations are counted per group (Stats.Expired,
// hourglass_expired_total).

// ReasonExpired is the dead-letter reason of a message handed out after
// its deadline.
const ReasonExpired = "expired"

// DeadReasonProperty is the property of a dead-letter copy that says why
// it was dead-lettered, when the reason is not running out of attempts.
const DeadReasonProperty = "hourglass-dead-reason"

// expireHandoutsLocked takes back the leases of handouts found expired and queues
// them for the dead-letter topic. They are neither ready nor leased
// meanwhile, so no receive hands them out again in this process.
func (c *consumers) expireHandoutsLocked(g *group, hs []handout) {
	for _, h := range hs {
		if !c.takeBackLocked(g, h) {
			continue
		}
		c.addDeadLettersLocked(deadLetter{g: g, queue: h.queue, offset: h.offset, attempt: h.attempt - 1, reason: ReasonExpired})
	}
	c.life.kickLoop()
}

// timerEndedLocked takes a lease or retry timer that ended in the
// dispatcher's lease wheel: the consumers started it, and the dispatch
// loop hands it back (Engine.loop), so the dispatcher never calls them.
func (c *consumers) timerEndedLocked(ref timerRef) {
	switch ref.kind {
	case refLease:
		c.leaseExpiredLocked(ref)
	case refRetry:
		c.retryReadyLocked(ref)
	}
}
