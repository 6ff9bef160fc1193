package engine

import "context"

// AckBehind is Ack answered before its record is durable: it checks every
// receipt and ends the leases at once, as Ack does (an unknown receipt
// fails it and acks nothing), then returns, while the ack record is
// appended and applied behind it. It is for protocols whose clients ack one
// message a call (the RocketMQ 5 SimpleConsumer), where an answer after
// each fdatasync caps a consumer at its acks in flight per group commit.
//
// What it gives up is only the ack's durability, never a message: a crash
// before the record is durable delivers the messages again (leases are
// not durable), as an ack lost in transit would. The record is appended
// after the call returns, so it lands after every record appended before
// the call, the fire record of each acked message among them. The
// appender holds gate shared from before the append until the effect is
// applied (invariant E2); Close's checkpoint waits for it. A failed append
// gives the leases back, and the messages come back when they end.
func (e *Engine) AckBehind(ctx context.Context, topic, name string, receipts ...string) error {
	a, err := e.cons.stopAcks(ctx, topic, name, receipts)
	if err != nil {
		return err
	}
	go func() {
		defer e.gate.RUnlock()
		if err := e.cons.commitAcks(a); err != nil {
			e.opts.Logger.Warn("an ack answered before its record failed to be written; its messages come back when their leases end",
				"topic", topic, "group", name, "messages", len(a.leases), "err", err)
		}
	}()
	return nil
}
