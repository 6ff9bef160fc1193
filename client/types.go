package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/hourglass-mq/hourglass/api"
	"time"
	"unicode/utf8"
)

// Millis is an instant as Unix milliseconds, the API's wire format for
// times (package api's). Zero means "not set" or "not known" where a
// field says so.
type Millis = api.Millis

// MillisOf returns t as Millis.
func MillisOf(t time.Time) Millis { return api.MillisOf(t) }

// When says when a message becomes visible: at most one field set; the
// zero value means now. Build one with After, AtTime or AtLevel.
type When struct {
	// Delay is relative to the broker's clock when it accepts the request.
	Delay time.Duration
	// At is an absolute time; a time in the past means now. Sent in whole
	// milliseconds, rounded up (a fraction of one never makes it early).
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

// wire returns w in the API's form.
func (w When) wire() api.Delivery {
	var d api.Delivery
	if w.Delay != 0 {
		d.Delay = w.Delay.String()
	}
	if !w.At.IsZero() {
		d.At = api.DueMillisOf(w.At)
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
	// DedupID makes the send idempotent: while the topic's dedup window
	// holds, a second send with the same ID stores nothing and returns the
	// first message's receipt with Duplicate set. A send that carries one
	// is retried after an ambiguous failure too (see the package doc);
	// WithIdempotentSends draws one for every send that has none.
	DedupID string
	// Deadline, if set, is when the message stops being worth delivering:
	// a consumer group that would get it later dead-letters it with reason
	// expired instead. TTL is the same relative to the broker's clock at
	// acceptance; set at most one.
	Deadline time.Time
	TTL      time.Duration
	// Window lets the broker make the message visible at any time in
	// [due, due+Window] (millisecond precision), to spread a herd.
	Window time.Duration
}

// wire returns m in the API's send format.
func (m Message) wire() (api.SendMessage, error) {
	if err := m.When.validate(); err != nil {
		return api.SendMessage{}, err
	}
	if !m.Deadline.IsZero() && m.TTL != 0 {
		return api.SendMessage{}, fmt.Errorf("hourglass client: set at most one of Message.Deadline and Message.TTL")
	}
	out := api.SendMessage{Key: m.Key, Tag: m.Tag, Group: m.Group, Properties: m.Properties, DedupID: m.DedupID, Delivery: m.When.wire()}
	if !m.Deadline.IsZero() {
		// Rounded down, unlike At: a deadline is the latest time a
		// message may be handed out, so a fraction of a millisecond must
		// not make it later.
		out.Deadline = api.MillisOf(m.Deadline)
	}
	if m.TTL != 0 {
		out.TTL = m.TTL.String()
	}
	// Rounded up: a window of 1.5 ms lets the broker use 2 ms, not 1.
	out.Window = int64((m.Window + time.Millisecond - 1) / time.Millisecond)
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		out.Body = &s
	} else {
		s := base64.StdEncoding.EncodeToString(m.Body)
		out.BodyBase64 = &s
	}
	return out, nil
}

// MarshalJSON encodes m in the API's send format.
func (m Message) MarshalJSON() ([]byte, error) {
	w, err := m.wire()
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// Receipt is what a send returns: the message's ID (to inspect, cancel or
// reschedule it) and when it will become visible.
type Receipt = api.Receipt

// State is where a message is in its life.
type State = api.State

// The states Inspect reports (see package api).
const (
	StatePending   = api.StatePending
	StateDue       = api.StateDue
	StateVisible   = api.StateVisible
	StateCancelled = api.StateCancelled
)

// Info describes a message: where it is and when it fires.
type Info = api.MessageInfo

// Rescheduled is what Reschedule returns.
type Rescheduled = api.Rescheduled

// TopicConfig configures a new topic; zero fields take the broker's defaults.
type TopicConfig = api.TopicConfig

// TopicInfo describes a topic.
type TopicInfo struct {
	Name   string
	Queues int
	FIFO   bool
	// Pending is the number of messages waiting for their due time.
	Pending int64
	// Visible is the number of messages that became visible, ever.
	Visible uint64
	Groups  []GroupInfo
}

// MarshalJSON encodes t in the API's format.
func (t TopicInfo) MarshalJSON() ([]byte, error) {
	w := api.Topic{Name: t.Name, Queues: t.Queues, FIFO: t.FIFO, Pending: t.Pending, Visible: t.Visible, Groups: make([]api.Group, len(t.Groups))}
	for i, g := range t.Groups {
		w.Groups[i] = g.wire()
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the API's format.
func (t *TopicInfo) UnmarshalJSON(b []byte) error {
	return unmarshalVia(b, t, topicInfoOf)
}

func topicInfoOf(w api.Topic) (TopicInfo, error) {
	t := TopicInfo{Name: w.Name, Queues: w.Queues, FIFO: w.FIFO, Pending: w.Pending, Visible: w.Visible, Groups: make([]GroupInfo, len(w.Groups))}
	for i, g := range w.Groups {
		var err error
		if t.Groups[i], err = groupInfoOf(g); err != nil {
			return TopicInfo{}, err
		}
	}
	return t, nil
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

func (g GroupConfig) wire() api.GroupConfig {
	return api.GroupConfig{MaxAttempts: g.MaxAttempts, BackoffBase: durationString(g.BackoffBase), BackoffMax: durationString(g.BackoffMax)}
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
	// Paused is true while the group's receives hand out nothing.
	Paused bool
}

// wire returns g in the API's form.
func (g GroupInfo) wire() api.Group {
	return api.Group{Topic: g.Topic, Name: g.Name, MaxAttempts: g.Config.MaxAttempts,
		BackoffBase: g.Config.BackoffBase.String(), BackoffMax: g.Config.BackoffMax.String(),
		Backlog: g.Backlog, InFlight: g.InFlight, Delivered: g.Delivered, Acked: g.Acked,
		Redelivered: g.Redelivered, DeadLettered: g.DeadLettered, DeadLetterTopic: g.DeadLetterTopic, Paused: g.Paused}
}

// MarshalJSON encodes g in the API's format.
func (g GroupInfo) MarshalJSON() ([]byte, error) { return json.Marshal(g.wire()) }

// UnmarshalJSON decodes the API's format.
func (g *GroupInfo) UnmarshalJSON(b []byte) error {
	return unmarshalVia(b, g, groupInfoOf)
}

// unmarshalVia decodes b as the wire type W and converts it into *dst;
// dst is left alone on error.
func unmarshalVia[W, T any](b []byte, dst *T, conv func(W) (T, error)) error {
	var w W
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	out, err := conv(w)
	if err == nil {
		*dst = out
	}
	return err
}

func groupInfoOf(w api.Group) (GroupInfo, error) {
	base, err := parseOptionalDuration("backoff_base", w.BackoffBase)
	if err != nil {
		return GroupInfo{}, err
	}
	bmax, err := parseOptionalDuration("backoff_max", w.BackoffMax)
	if err != nil {
		return GroupInfo{}, err
	}
	return GroupInfo{Topic: w.Topic, Name: w.Name, Config: GroupConfig{MaxAttempts: w.MaxAttempts, BackoffBase: base, BackoffMax: bmax},
		Backlog: w.Backlog, InFlight: w.InFlight, Delivered: w.Delivered, Acked: w.Acked,
		Redelivered: w.Redelivered, DeadLettered: w.DeadLettered, DeadLetterTopic: w.DeadLetterTopic, Paused: w.Paused}, nil
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
	// Ack lists receipts of earlier deliveries to acknowledge in the same
	// request, before anything is leased: a consumer loop then makes one
	// request per batch instead of a Receive and an Ack. All or nothing,
	// as Ack: when Receive returns an error nothing was acked and nothing
	// leased (an unknown or expired receipt gives not_found); when it
	// returns messages, or none, every receipt was acked. At most 1000.
	// Brokers before this option refuse it (invalid_argument).
	Ack []string
	// BodyEncoding is the wire form of the bodies; Received.Body is the
	// same whichever is chosen. BodyText sends a UTF-8 body once, as
	// text, the cheapest for text bodies; BodyBase64 suits binary ones.
	// Empty leaves the broker's default (BodyBoth), which brokers before
	// this option need.
	BodyEncoding BodyEncoding
}

// BodyEncoding is how a receive sends message bodies (package api's).
type BodyEncoding = api.BodyEncoding

// The body encodings of ReceiveOptions.BodyEncoding.
const (
	BodyBoth   = api.BodyBoth
	BodyText   = api.BodyText
	BodyBase64 = api.BodyBase64
)

func (o ReceiveOptions) wire() api.ReceiveRequest {
	return api.ReceiveRequest{Max: o.Max, Invisible: durationString(o.Invisible), Wait: durationString(o.Wait),
		Ack: o.Ack, BodyEncoding: o.BodyEncoding}
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

// MarshalJSON encodes r in the API's format (body when valid UTF-8, and
// body_base64 always).
func (r Received) MarshalJSON() ([]byte, error) {
	w := api.ReceivedMessage{ID: r.ID, Receipt: r.Receipt, Attempt: r.Attempt, Queue: r.Queue, Offset: r.Offset,
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
	var w api.ReceivedMessage
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
type Stats = api.Stats
