package api

// ScheduleConfig creates a recurring schedule (PUT /v1/schedules/{schedule}):
// every time Cron falls due in TZ, a message with Key "@<fire time>", Tag,
// Properties and the body is sent to Topic.
type ScheduleConfig struct {
	Topic string `json:"topic"`
	// Cron is 5 fields (minute hour day-of-month month day-of-week) or a
	// descriptor (@daily, @hourly, @every 10m, ...).
	Cron string `json:"cron"`
	// TZ is an IANA time zone name; default UTC.
	TZ string `json:"tz,omitempty"`
	// CatchUp is skip, once (default) or all: what to do with fire times
	// missed while the broker was down.
	CatchUp string `json:"catch_up,omitempty"`
	// Key prefixes every firing's key; default the schedule's ID.
	Key        string            `json:"key,omitempty"`
	Tag        string            `json:"tag,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	// Body or BodyBase64, not both; none means an empty body.
	Body       *string `json:"body,omitempty"`
	BodyBase64 *string `json:"body_base64,omitempty"`
}

// The states of a schedule.
const (
	ScheduleActive  = "active"
	SchedulePaused  = "paused"
	ScheduleDeleted = "deleted"
)

// Schedule describes a recurring schedule.
type Schedule struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	// Key is the prefix of every firing's key: "<key>@<fire time>".
	Key        string            `json:"key"`
	Tag        string            `json:"tag"`
	Properties map[string]string `json:"properties,omitempty"`
	BodyBytes  int               `json:"body_bytes"`
	Cron       string            `json:"cron"`
	TZ         string            `json:"tz"`
	CatchUp    string            `json:"catch_up"`
	// State is ScheduleActive, SchedulePaused, or ScheduleDeleted (in the
	// answer of a delete).
	State   string `json:"state"`
	Created Millis `json:"created"`
	// LastFire is the latest fire time whose message was sent (it is sent
	// a few seconds ahead, due at the fire time); 0 when none.
	LastFire      Millis `json:"last_fire"`
	LastMessageID string `json:"last_message_id"`
	// Next are the next (up to 5) fire times; empty when paused. NextTimes
	// are the same in RFC 3339 UTC, NextLocal in the schedule's time zone
	// (with its offset), as its cron expression reads them.
	Next      []Millis `json:"next"`
	NextTimes []string `json:"next_times"`
	NextLocal []string `json:"next_local"`
	// LastError is the last failure to send a firing (it is retried).
	LastError string `json:"last_error,omitempty"`
}

// ScheduleList answers GET /v1/schedules, by ID.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}

// ScheduleFiring is one fire time of a schedule and what became of it:
// the message the broker holds under its key, or none.
type ScheduleFiring struct {
	Fire     Millis `json:"fire"`
	FireTime string `json:"fire_time"`
	// FireLocal is the fire time in the schedule's time zone.
	FireLocal string `json:"fire_local"`
	Key       string `json:"key"`
	// Sent is false for a fire time skipped (paused, catch-up skip) or
	// whose message is past retention; MessageID and State are then empty.
	Sent      bool   `json:"sent"`
	MessageID string `json:"message_id,omitempty"`
	State     State  `json:"state,omitempty"`
	// Ahead marks a firing sent ahead of its time: it is pending until
	// its fire time.
	Ahead bool `json:"ahead"`
}

// ScheduleFirings answers GET /v1/schedules/{schedule}/firings: the
// firings sent ahead, then the latest fire times, newest first.
type ScheduleFirings struct {
	ID      string           `json:"id"`
	TZ      string           `json:"tz"`
	Firings []ScheduleFiring `json:"firings"`
}
