package api

import "github.com/hourglass-mq/hourglass/errs"

// Delivery says when a message becomes visible, inlined in SendMessage
// and RescheduleRequest: at most one field set; none means now.
type Delivery struct {
	// Delay is a Go duration from the broker's clock at acceptance.
	Delay string `json:"delay,omitempty"`
	// At is an absolute time; a past time means now.
	At Millis `json:"at,omitempty"`
	// Level is a 1-based index into the broker's delay-level table.
	Level int `json:"level,omitempty"`
}

// SendMessage is one message to send (POST /v1/topics/{topic}/messages,
// and each element of a batch). Body or BodyBase64, not both.
type SendMessage struct {
	Key        string            `json:"key,omitempty"`
	Tag        string            `json:"tag,omitempty"`
	Group      string            `json:"group,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	// Body is the body as UTF-8 text.
	Body *string `json:"body,omitempty"`
	// BodyBase64 is the body in standard base64, for binary bodies.
	BodyBase64 *string `json:"body_base64,omitempty"`
	// DedupID makes the send idempotent: within the topic's dedup window
	// a second send with the same ID stores nothing and answers with the
	// first message's receipt (Duplicate set), or with already_exists
	// (409, carrying the first ID) if it asks for something else.
	DedupID string `json:"dedup_id,omitempty"`
	// Deadline (absolute Unix ms) or TTL (a Go duration from acceptance):
	// a message handed out to a consumer group after it goes to the
	// group's dead-letter topic with reason expired instead. At most one;
	// not before the due time, not beyond the maximum delay.
	Deadline Millis `json:"deadline,omitempty"`
	TTL      string `json:"ttl,omitempty"`
	// Window is a tolerance in ms: the message may become visible at any
	// time in [due, due+window], which lets the broker spread a herd.
	Window int64 `json:"window,omitempty"`
	Delivery
}

// BatchRequest is POST /v1/topics/{topic}/batch: all stored or none.
type BatchRequest struct {
	Messages []SendMessage `json:"messages"`
}

// Receipt is what a send returns: the message's ID (to inspect, cancel
// or reschedule it) and when it will become visible.
type Receipt struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	Queue int    `json:"queue"`
	// Due is when the message becomes visible.
	Due Millis `json:"due"`
	// DueTime is Due in RFC 3339, as the broker rendered it.
	DueTime string `json:"due_time"`
	// Duplicate says this send repeated an earlier one's dedup_id: nothing
	// was stored, and ID and Due are the first message's.
	Duplicate bool `json:"duplicate,omitempty"`
}

// BatchReceipts answers a batch send, in request order.
type BatchReceipts struct {
	Receipts []Receipt `json:"receipts"`
}

// State is where a message is in its life.
type State string

// The states an inspect reports. Pending: waiting for its due time (can be
// cancelled or rescheduled). Due: its time has passed and it is queued for
// dispatch, spread at the dispatch rate (no longer cancellable). Visible:
// in its topic queue, available to consumers. Cancelled: never delivered.
const (
	StatePending   State = "pending"
	StateDue       State = "due"
	StateVisible   State = "visible"
	StateCancelled State = "cancelled"
)

// States lists every State, in life order.
func States() []State { return []State{StatePending, StateDue, StateVisible, StateCancelled} }

// MessageInfo describes a message: where it is and when it fires
// (GET /v1/messages/{id} and GET /v1/topics/{topic}/keys/{key}).
type MessageInfo struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	Topic string `json:"topic"`
	Queue int    `json:"queue"`
	Key   string `json:"key"`
	Tag   string `json:"tag"`
	// Due is the delivery time after any reschedule.
	Due     Millis `json:"due"`
	DueTime string `json:"due_time"`
	// Sent is when the broker accepted the message.
	Sent Millis `json:"sent"`
	// Visible is when it became visible, 0 when not (yet) known.
	Visible    Millis            `json:"visible"`
	BodyBytes  int               `json:"body_bytes"`
	Properties map[string]string `json:"properties,omitempty"`
	// DedupID, Deadline and Window are what the send asked for, if it did.
	DedupID  string `json:"dedup_id,omitempty"`
	Deadline Millis `json:"deadline,omitempty"`
	Window   int64  `json:"window,omitempty"`
}

// Cancelled answers DELETE /v1/messages/{id}; State is always cancelled.
type Cancelled struct {
	ID    string `json:"id"`
	State State  `json:"state"`
}

// RescheduleRequest is POST /v1/messages/{id}/reschedule. A non-zero
// IfDue makes it a compare-and-set on the current due time.
type RescheduleRequest struct {
	Delivery
	IfDue Millis `json:"if_due,omitempty"`
}

// Rescheduled answers a reschedule with the new due time.
type Rescheduled struct {
	ID      string `json:"id"`
	Due     Millis `json:"due"`
	DueTime string `json:"due_time"`
}

// TopicConfig configures a new topic (PUT /v1/topics/{topic}); zero
// fields take the broker's defaults.
type TopicConfig struct {
	// Queues is the number of queues (default: the broker's -default-queues).
	Queues int `json:"queues,omitempty"`
	// FIFO hands out the messages of one message group one at a time, in
	// send order.
	FIFO bool `json:"fifo,omitempty"`
}

// Topic describes a topic with its counts and consumer groups.
type Topic struct {
	Name   string `json:"name"`
	Queues int    `json:"queues"`
	FIFO   bool   `json:"fifo"`
	// Pending is the number of messages waiting for their due time.
	Pending int64 `json:"pending"`
	// Visible is the number of messages that became visible, ever.
	Visible uint64  `json:"visible"`
	Groups  []Group `json:"groups"`
}

// TopicList answers GET /v1/topics, sorted by name.
type TopicList struct {
	Topics []Topic `json:"topics"`
}

// GroupConfig configures a consumer group (PUT
// /v1/topics/{topic}/groups/{group}); empty fields take the defaults.
type GroupConfig struct {
	MaxAttempts int    `json:"max_attempts,omitempty"`
	BackoffBase string `json:"backoff_base,omitempty"`
	BackoffMax  string `json:"backoff_max,omitempty"`
}

// Group describes a consumer group of a topic.
type Group struct {
	Topic       string `json:"topic"`
	Name        string `json:"name"`
	MaxAttempts int    `json:"max_attempts"`
	BackoffBase string `json:"backoff_base"`
	BackoffMax  string `json:"backoff_max"`
	// Backlog is the number of visible messages not yet acked.
	Backlog  int64 `json:"backlog"`
	InFlight int64 `json:"in_flight"`
	// Counters since the group was created.
	Delivered    uint64 `json:"delivered"`
	Acked        uint64 `json:"acked"`
	Redelivered  uint64 `json:"redelivered"`
	DeadLettered uint64 `json:"dead_lettered"`
	// DeadLetterTopic receives messages that ran out of attempts.
	DeadLetterTopic string `json:"dead_letter_topic"`
	// Paused is true while the group's receives hand out nothing.
	Paused bool `json:"paused"`
}

// GroupList answers GET /v1/topics/{topic}/groups.
type GroupList struct {
	Groups []Group `json:"groups"`
}

// ReceiveRequest is POST .../receive; zero fields take the defaults.
type ReceiveRequest struct {
	Max       int    `json:"max,omitempty"`
	Invisible string `json:"invisible,omitempty"`
	Wait      string `json:"wait,omitempty"`
	// Ack lists receipts of earlier deliveries to acknowledge before
	// leasing, so that a consumer loop needs one request per batch
	// instead of two. It follows AckRequest's rules: all or nothing, at
	// most 1000. If one receipt fails, the request fails with that
	// receipt's error and leases nothing.
	Ack []string `json:"ack,omitempty"`
	// BodyEncoding chooses the forms each message's body is sent in;
	// empty means BodyBoth.
	BodyEncoding BodyEncoding `json:"body_encoding,omitempty"`
}

// BodyEncoding is how a receive sends message bodies.
type BodyEncoding string

// The body encodings. Both (the default): body_base64 always, and body
// too when the body is valid UTF-8. Text: body when the body is valid
// UTF-8, otherwise body_base64; never both, so text bodies cross the
// wire once. Base64: body_base64 only.
const (
	BodyBoth   BodyEncoding = "both"
	BodyText   BodyEncoding = "text"
	BodyBase64 BodyEncoding = "base64"
)

// BodyEncodings lists every BodyEncoding.
func BodyEncodings() []BodyEncoding { return []BodyEncoding{BodyBoth, BodyText, BodyBase64} }

// ReceivedMessage is one leased message of a receive.
type ReceivedMessage struct {
	ID         string            `json:"id"`
	Receipt    string            `json:"receipt"`
	Attempt    int               `json:"attempt"`
	Queue      int               `json:"queue"`
	Offset     uint64            `json:"offset"`
	Key        string            `json:"key"`
	Tag        string            `json:"tag"`
	Group      string            `json:"group"`
	Properties map[string]string `json:"properties,omitempty"`
	// Body is present only when the body is valid UTF-8 and the receive
	// asked for body encoding both or text.
	Body *string `json:"body,omitempty"`
	// BodyBase64 is present unless the receive asked for body encoding
	// text and Body holds the body; with the default encoding, always.
	BodyBase64 string `json:"body_base64,omitempty"`
	Due        Millis `json:"due"`
	Visible    Millis `json:"visible"`
}

// ReceiveResponse answers a receive; an empty list when nothing came.
type ReceiveResponse struct {
	Messages []ReceivedMessage `json:"messages"`
	// Acked counts the distinct receipts of the request's Ack that were
	// acknowledged: all of them, or 0 when it gave none.
	Acked int `json:"acked"`
}

// StreamAck is one line of the request body of POST .../stream: receipts
// of the stream's group to acknowledge, all or nothing (AckRequest's
// rules, at most 1000). The stream answers it with a ReceiveResponse line
// whose Messages is empty and Acked counts them.
type StreamAck struct {
	Ack []string `json:"ack"`
}

// SendStreamAnswer is one response line of POST /v1/topics/{topic}/stream,
// the answer to one message line, in order: Receipt once the message is
// stored, or Refused when it was not (that message only; the stream goes
// on). Exactly one is set.
type SendStreamAnswer struct {
	Receipt *Receipt   `json:"receipt,omitempty"`
	Refused *ErrorBody `json:"refused,omitempty"`
}

// StreamContentType is the media type of both directions of POST
// .../stream: newline-delimited JSON, one object a line.
const StreamContentType = "application/x-ndjson"

// AckRequest is POST .../ack: all or nothing.
type AckRequest struct {
	Receipts []string `json:"receipts"`
}

// AckResponse counts the distinct receipts acked.
type AckResponse struct {
	Acked int `json:"acked"`
}

// NackRequest is POST .../nack; an empty Delay means the group's backoff.
type NackRequest struct {
	Receipt string `json:"receipt"`
	Delay   string `json:"delay,omitempty"`
}

// InvisibilityRequest is POST .../invisibility.
type InvisibilityRequest struct {
	Receipt   string `json:"receipt"`
	Invisible string `json:"invisible"`
}

// RedriveRequest is POST .../redrive; zero Max means DefaultRedrive.
type RedriveRequest struct {
	Max int `json:"max,omitempty"`
}

// DefaultRedrive is how many dead letters a redrive moves when the
// request does not say.
const DefaultRedrive = 100

// RedriveResponse counts the messages moved.
type RedriveResponse struct {
	Redriven int `json:"redriven"`
}

// Empty is the answer of nack and invisibility: {}.
type Empty struct{}

// Health answers GET /healthz: {"status":"ok",...}, or with 503
// {"status":"failed","error":...} once the broker stopped after a storage
// failure (it then exits; see docs/architecture.md, fault model). Both
// carry the build of the running binary, as `hourglass version` prints it:
// every build field is non-empty ("devel" and "unknown" for an unstamped
// build).
type Health struct {
	// Status is "ok"; "degraded" (HTTP 200) while the broker serves but
	// something underneath is wrong, which Problems says; or "failed"
	// (HTTP 503) once a storage failure stopped it, which Error says.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Problems says, one sentence each, what makes the status degraded:
	// fire records or checkpoints that fail (a full disk), damage found
	// in the commit log (its segment and position), and the schedules'
	// journal.
	Problems []string `json:"problems,omitempty"`
	// Version is the release version stamped at build time, or "devel".
	Version string `json:"version"`
	// Commit is the commit the binary was built from, or "unknown".
	Commit string `json:"commit"`
	// BuildDate is when the binary was built (RFC 3339), or "unknown".
	BuildDate string `json:"build_date"`
	// GoVersion is the Go release that built the binary.
	GoVersion string `json:"go_version"`
	// Clock is the broker's clock mode: ClockSystem, or ClockVirtual for a
	// broker started for tests with -clock virtual.
	Clock string `json:"clock"`
}

// Stats is GET /v1/stats, the broker's engine-wide instrumentation.
type Stats struct {
	// Pending is the number of messages accepted and not yet visible or cancelled.
	Pending int64 `json:"pending"`
	// Counters since the data directory was created or the broker started
	// (see the broker's metrics documentation).
	Sent        uint64 `json:"sent"`
	Fired       uint64 `json:"fired"`
	Cancelled   uint64 `json:"cancelled"`
	Rescheduled uint64 `json:"rescheduled"`
	// LatenessCount is the number of lateness observations.
	LatenessCount uint64 `json:"lateness_count"`
	// LatenessP50Ms and LatenessP99Ms are lateness quantiles in ms (the
	// upper bound of the histogram bucket holding them); nil when nothing
	// was observed or the quantile is beyond the largest bucket.
	LatenessP50Ms *float64 `json:"lateness_p50_ms"`
	LatenessP99Ms *float64 `json:"lateness_p99_ms"`
	// RecoverySeconds is how long the last startup recovery took.
	RecoverySeconds float64 `json:"recovery_seconds"`
	// ClockJumps counts detected wall-clock steps.
	ClockJumps uint64 `json:"clock_jumps"`
}

// Error is the body of every error response.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is an error's stable code (see Status) and human message.
type ErrorBody struct {
	Code    errs.Code `json:"code"`
	Message string    `json:"message"`
	// ID names the message the error is about when the caller needs it:
	// the first message of a conflicting dedup_id (already_exists).
	ID string `json:"id,omitempty"`
}
