package api

// MessagePage answers the listings of messages by state (GET /v1/pending,
// GET /v1/topics/{topic}/groups/{group}/inflight and .../dead): one page,
// and the cursor of the next.
type MessagePage struct {
	Items []ListedMessage `json:"items"`
	// NextCursor is the cursor parameter of the next page; null at the
	// listing's end. A page may hold fewer items than the limit, even
	// none, and still have a next: a page examines a bounded number of
	// entries (Scanned) and records (Read), so that a filter matching
	// little never makes one request read without end.
	NextCursor *string `json:"next_cursor"`
	// Scanned is the index entries the page examined, Read the message
	// records it read.
	Scanned int `json:"scanned"`
	Read    int `json:"read"`
}

// ListedMessage is one message of a listing. Fields that belong to one
// listing are left out of the others: fire_at (pending), group, attempt
// and lease_end (in flight), reason, attempts, origin_topic and origin_id
// (dead letters).
type ListedMessage struct {
	// ID names the message for GET /v1/messages/{id}, keyed or not.
	ID    string `json:"id"`
	State State  `json:"state"`
	Topic string `json:"topic"`
	Queue int    `json:"queue"`
	Key   string `json:"key"`
	Tag   string `json:"tag"`
	// Due is the delivery time after any reschedule; for a dead letter,
	// when it was dead-lettered.
	Due        Millis            `json:"due"`
	DueTime    string            `json:"due_time"`
	Sent       Millis            `json:"sent"`
	BodyBytes  int               `json:"body_bytes"`
	Properties map[string]string `json:"properties,omitempty"`
	// FireAt is when a pending message's timer fires: its due time, or a
	// time in its tolerance window.
	FireAt Millis `json:"fire_at,omitempty"`
	// Group, Attempt and LeaseEnd describe a delivery in flight.
	Group    string `json:"group,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	LeaseEnd Millis `json:"lease_end,omitempty"`
	// Reason (max-attempts, expired, given-up), Attempts, and the
	// message the dead letter copies.
	Reason      string `json:"reason,omitempty"`
	Attempts    int    `json:"attempts,omitempty"`
	OriginTopic string `json:"origin_topic,omitempty"`
	OriginID    string `json:"origin_id,omitempty"`
}

// DeadSelection is POST .../dead/resend and .../dead/delete: the IDs of
// the dead letters (as listed) to act on, 1 to MaxDeadSelection of them.
type DeadSelection struct {
	IDs []string `json:"ids"`
}

// MaxDeadSelection is the most dead letters one resend or delete names.
const MaxDeadSelection = 1000

// DeadLetterResult answers a dead-letter action: what it did (resend,
// delete, purge) and to how many.
type DeadLetterResult struct {
	Action string `json:"action"`
	Count  int    `json:"count"`
}

// Limits of a listing page: its items, and the characters of a key
// prefix or tag filter.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
	MaxListFilter    = 4096
)

// MaxMillis is the latest time the API takes: the last millisecond of the
// year 9999.
const MaxMillis Millis = 253402300799999
