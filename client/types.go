package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Millis is an instant as Unix milliseconds, the API's wire format for
// times. Zero means "not set" or "not known" where a field says so.
type Millis int64

// MillisOf returns t as Millis.
func MillisOf(t time.Time) Millis { return Millis(t.UnixMilli()) }

// Time returns m as a time.Time (in the local zone).
func (m Millis) Time() time.Time { return time.UnixMilli(int64(m)) }

// String renders m in RFC 3339, UTC, with milliseconds; "-" for zero.
func (m Millis) String() string {
	if m == 0 {
		return "-"
	}
	return m.Time().UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// When says when a message becomes visible: at most one field set; the
// zero value means now. Build one with After, AtTime or AtLevel.
type When struct {
	// Delay is relative to the broker's clock when it accepts the request.
	Delay time.Duration
	// At is an absolute time; a time in the past means now. Sent with
	// millisecond precision.
	At time.Time
	// Level is a 1-based index into the broker's delay-level table.
	Level int
}

// After returns a When that delays by d.
func After(d time.Duration) When { return When{Delay: d} }

// AtTime returns a When for the absolute time t.
func AtTime(t time.Time) When { return When{At: t} }

// AtLevel returns a When for delay level n (1-based).
func AtLevel(n int) When { return When{Level: n} }

// IsZero reports whether w means now.
func (w When) IsZero() bool { return w.Delay == 0 && w.At.IsZero() && w.Level == 0 }

// validate rejects a When with more than one field set before it costs a
// round trip (the broker would reject it too).
func (w When) validate() error {
	n := 0
	if w.Delay != 0 {
		n++
	}
	if !w.At.IsZero() {
		n++
	}
	if w.Level != 0 {
		n++
	}
	if n > 1 {
		return fmt.Errorf("hourglass client: set at most one of When.Delay, When.At and When.Level")
	}
	return nil
}

// deliveryJSON is the wire form of When, inlined in send and reschedule
// requests.
type deliveryJSON struct {
	Delay string `json:"delay,omitempty"`
	At    int64  `json:"at,omitempty"`
	Level int    `json:"level,omitempty"`
}

func (w When) wire() deliveryJSON {
	var d deliveryJSON
	if w.Delay != 0 {
		d.Delay = w.Delay.String()
	}
	if !w.At.IsZero() {
		d.At = w.At.UnixMilli()
	}
	d.Level = w.Level
	return d
}

// Message is what a producer sends.
type Message struct {
	// Key is an optional business key ("order-123"): the message can be
	// found by it with InspectKey.
	Key string
	// Tag is an optional short label.
	Tag string
	// Group is the optional FIFO message group.
	Group string
	// Properties are optional user string pairs.
	Properties map[string]string
	// Body is the payload. It travels as a JSON string when it is valid
	// UTF-8 and in base64 otherwise.
	Body []byte
	// When is the delivery time; zero means now.
	When When
}

// messageJSON is the wire form of a Message.
type messageJSON struct {
	Key        string            `json:"key,omitempty"`
	Tag        string            `json:"tag,omitempty"`
	Group      string            `json:"group,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 *string           `json:"body_base64,omitempty"`
	deliveryJSON
}

// MarshalJSON encodes m in the API's send format.
func (m Message) MarshalJSON() ([]byte, error) {
	if err := m.When.validate(); err != nil {
		return nil, err
	}
	out := messageJSON{Key: m.Key, Tag: m.Tag, Group: m.Group, Properties: m.Properties, deliveryJSON: m.When.wire()}
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		out.Body = &s
	} else {
		s := base64.StdEncoding.EncodeToString(m.Body)
		out.BodyBase64 = &s
	}
	return json.Marshal(out)
}

// Receipt is what a send returns: the message's ID (to inspect, cancel or
// reschedule it) and when it will become visible.
type Receipt struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	Queue int    `json:"queue"`
	// Due is when the message becomes visible.
	Due Millis `json:"due"`
	// DueTime is Due in RFC 3339, as the broker rendered it.
	DueTime string `json:"due_time,omitempty"`
}

// State is where a message is in its life.
type State string

// The states Inspect reports.
const (
	// StatePending: waiting for its due time; can be cancelled or rescheduled.
	StatePending State = "pending"
	// StateDue: due, queued for dispatch (a herd is spread at the
	// dispatch rate); can no longer be cancelled.
	StateDue State = "due"
	// StateVisible: in its topic queue, available to consumers.
	StateVisible State = "visible"
	// StateCancelled: cancelled before it fell due; never delivered.
	StateCancelled State = "cancelled"
)

// Info describes a message: where it is and when it fires.
type Info struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	Topic string `json:"topic"`
	Queue int    `json:"queue"`
	Key   string `json:"key,omitempty"`
	Tag   string `json:"tag,omitempty"`
	// Due is the delivery time after any reschedule.
	Due     Millis `json:"due"`
	DueTime string `json:"due_time,omitempty"`
	// Sent is when the broker accepted the message.
	Sent Millis `json:"sent"`
	// Visible is when it became visible, 0 when not (yet) known.
	Visible    Millis            `json:"visible"`
	BodyBytes  int               `json:"body_bytes"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Rescheduled is what Reschedule returns.
type Rescheduled struct {
	ID      string `json:"id"`
	Due     Millis `json:"due"`
	DueTime string `json:"due_time,omitempty"`
}

// TopicConfig configures a new topic; zero fields take the broker's defaults.
type TopicConfig struct {
	// Queues is the number of queues (default: the broker's -default-queues).
	Queues int `json:"queues,omitempty"`
	// FIFO hands out the messages of one message group one at a time, in
	// send order.
	FIFO bool `json:"fifo,omitempty"`
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name   string `json:"name"`
	Queues int    `json:"queues"`
	FIFO   bool   `json:"fifo"`
	// Pending is the number of messages waiting for their due time.
	Pending int64 `json:"pending"`
	// Visible is the number of messages that became visible, ever.
	Visible uint64      `json:"visible"`
	Groups  []GroupInfo `json:"groups"`
}

// GroupConfig configures a consumer group; zero fields take the broker's
// defaults (16 attempts, backoff 1s doubling up to 5m).
type GroupConfig struct {
	// MaxAttempts is how many deliveries a message gets before it goes to
	// the group's dead-letter topic.
	MaxAttempts int
	// BackoffBase is the redelivery delay after the first failed attempt;
	// it doubles with each attempt up to BackoffMax.
	BackoffBase time.Duration
	BackoffMax  time.Duration
}

type groupConfigJSON struct {
	MaxAttempts int    `json:"max_attempts,omitempty"`
	BackoffBase string `json:"backoff_base,omitempty"`
	BackoffMax  string `json:"backoff_max,omitempty"`
}

func (g GroupConfig) wire() groupConfigJSON {
	out := groupConfigJSON{MaxAttempts: g.MaxAttempts}
	if g.BackoffBase != 0 {
		out.BackoffBase = g.BackoffBase.String()
	}
	if g.BackoffMax != 0 {
		out.BackoffMax = g.BackoffMax.String()
	}
	return out
}

// GroupInfo describes a consumer group of a topic.
type GroupInfo struct {
	Topic  string
	Name   string
	Config GroupConfig
	// Backlog is the number of visible messages not yet delivered to the group.
	Backlog int64
	// InFlight is the number of messages leased and not yet acked.
	InFlight int64
	// Counters since the group was created.
	Delivered, Acked, Redelivered, DeadLettered uint64
	// DeadLetterTopic receives messages that ran out of attempts.
	DeadLetterTopic string
}

// groupJSON is the wire form of GroupInfo.
type groupJSON struct {
	Topic           string `json:"topic"`
	Name            string `json:"name"`
	MaxAttempts     int    `json:"max_attempts"`
	BackoffBase     string `json:"backoff_base"`
	BackoffMax      string `json:"backoff_max"`
	Backlog         int64  `json:"backlog"`
	InFlight        int64  `json:"in_flight"`
	Delivered       uint64 `json:"delivered"`
	Acked           uint64 `json:"acked"`
	Redelivered     uint64 `json:"redelivered"`
	DeadLettered    uint64 `json:"dead_lettered"`
	DeadLetterTopic string `json:"dead_letter_topic"`
}

// MarshalJSON encodes g in the API's format.
func (g GroupInfo) MarshalJSON() ([]byte, error) {
	return json.Marshal(groupJSON{Topic: g.Topic, Name: g.Name, MaxAttempts: g.Config.MaxAttempts,
		BackoffBase: g.Config.BackoffBase.String(), BackoffMax: g.Config.BackoffMax.String(),
		Backlog: g.Backlog, InFlight: g.InFlight, Delivered: g.Delivered, Acked: g.Acked,
		Redelivered: g.Redelivered, DeadLettered: g.DeadLettered, DeadLetterTopic: g.DeadLetterTopic})
}

// UnmarshalJSON decodes the API's format.
func (g *GroupInfo) UnmarshalJSON(b []byte) error {
	var w groupJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	base, err := parseOptionalDuration("backoff_base", w.BackoffBase)
	if err != nil {
		return err
	}
	bmax, err := parseOptionalDuration("backoff_max", w.BackoffMax)
	if err != nil {
		return err
	}
	*g = GroupInfo{Topic: w.Topic, Name: w.Name, Config: GroupConfig{MaxAttempts: w.MaxAttempts, BackoffBase: base, BackoffMax: bmax},
		Backlog: w.Backlog, InFlight: w.InFlight, Delivered: w.Delivered, Acked: w.Acked,
		Redelivered: w.Redelivered, DeadLettered: w.DeadLettered, DeadLetterTopic: w.DeadLetterTopic}
	return nil
}

func parseOptionalDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("hourglass client: field %s: %w", field, err)
	}
	return d, nil
}

// ReceiveOptions tune a Receive; zero fields take the broker's defaults.
type ReceiveOptions struct {
	// Max is the most messages returned (broker default 32, limit 1000).
	Max int
	// Invisible is the lease: how long the messages stay hidden from the
	// group's other receivers unless acked (default 30s, limit 12h).
	Invisible time.Duration
	// Wait is the long poll: how long to wait for a first message when
	// none is visible (default 0: return at once; limit 30s).
	Wait time.Duration
}

type receiveJSON struct {
	Max       int    `json:"max,omitempty"`
	Invisible string `json:"invisible,omitempty"`
	Wait      string `json:"wait,omitempty"`
}

// Received is a message leased by a Receive.
type Received struct {
	ID string
	// Receipt is the lease handle for Ack, Nack and ChangeInvisibility.
	Receipt string
	// Attempt counts deliveries to this group, 1 for the first.
	Attempt    int
	Queue      int
	Offset     uint64
	Key        string
	Tag        string
	Group      string
	Properties map[string]string
	Body       []byte
	// Due is when the message was due; Visible when it became visible.
	// Visible minus Due is the broker's lateness for this message.
	Due, Visible Millis
}

// receivedJSON is the wire form of Received.
type receivedJSON struct {
	ID         string            `json:"id"`
	Receipt    string            `json:"receipt"`
	Attempt    int               `json:"attempt"`
	Queue      int               `json:"queue"`
	Offset     uint64            `json:"offset"`
	Key        string            `json:"key,omitempty"`
	Tag        string            `json:"tag,omitempty"`
	Group      string            `json:"group,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64"`
	Due        Millis            `json:"due"`
	Visible    Millis            `json:"visible"`
}

// MarshalJSON encodes r in the API's format (body when valid UTF-8, and
// body_base64 always).
func (r Received) MarshalJSON() ([]byte, error) {
	w := receivedJSON{ID: r.ID, Receipt: r.Receipt, Attempt: r.Attempt, Queue: r.Queue, Offset: r.Offset,
		Key: r.Key, Tag: r.Tag, Group: r.Group, Properties: r.Properties,
		BodyBase64: base64.StdEncoding.EncodeToString(r.Body), Due: r.Due, Visible: r.Visible}
	if utf8.Valid(r.Body) {
		s := string(r.Body)
		w.Body = &s
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the API's format; body_base64 wins over body.
func (r *Received) UnmarshalJSON(b []byte) error {
	var w receivedJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Received{ID: w.ID, Receipt: w.Receipt, Attempt: w.Attempt, Queue: w.Queue, Offset: w.Offset,
		Key: w.Key, Tag: w.Tag, Group: w.Group, Properties: w.Properties, Due: w.Due, Visible: w.Visible}
	switch {
	case w.BodyBase64 != "":
		body, err := base64.StdEncoding.DecodeString(w.BodyBase64)
		if err != nil {
			return fmt.Errorf("hourglass client: field body_base64: %w", err)
		}
		r.Body = body
	case w.Body != nil:
		r.Body = []byte(*w.Body)
	}
	return nil
}

// Lateness is how long after its due time the message became visible.
func (r Received) Lateness() time.Duration {
	return time.Duration(r.Visible-r.Due) * time.Millisecond
}

// Stats is the broker's engine-wide instrumentation.
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
