package api

// TrailEvent is one event of a message's history, read from the broker's
// commit log with the time it was recorded at.
type TrailEvent struct {
	// At is when it happened; AtTime the same in RFC 3339, UTC.
	At     Millis `json:"at"`
	AtTime string `json:"at_time"`
	// Kind is one of engine.EventKinds: sent, rescheduled, cancelled,
	// fell_due, visible, delivered, acked, nacked, lease_expired,
	// dead_lettered, redriven (the OpenAPI test holds the document's enum
	// to that list).
	Kind string `json:"kind"`
	// Message is the ID the event is of: the traced message, or its
	// dead-letter copy for the events after its dead-lettering.
	Message string `json:"message"`
	// Group and Attempt: the consumer group of a delivery, ack, nack,
	// lease expiry, dead-lettering or redrive, and the delivery's number.
	Group   string `json:"group,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Due is the due time a send or reschedule set. Until is a delivery's
	// lease end, or when a nacked or expired message comes back.
	Due   Millis `json:"due,omitempty"`
	Until Millis `json:"until,omitempty"`
	// Reason of a dead-lettering: max-attempts, expired or given-up.
	Reason string `json:"reason,omitempty"`
	// DeadLetter is the ID of the dead-letter copy a dead-lettering made.
	DeadLetter string `json:"dead_letter,omitempty"`
}

// Trail is a message's history (GET /v1/messages/{id}/trail).
type Trail struct {
	ID     string       `json:"id"`
	Topic  string       `json:"topic"`
	Events []TrailEvent `json:"events"`
	// Partial is true when retention removed log segments written after
	// the message: the events recorded there are gone.
	Partial bool `json:"partial"`
	// ScannedBytes is the log bytes the look-up read.
	ScannedBytes int64 `json:"scanned_bytes"`
}
