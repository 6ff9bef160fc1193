package api

// The broker's clock modes (hourglass serve -clock).
const (
	// ClockSystem is the system clock: the mode of every production broker.
	ClockSystem = "system"
	// ClockVirtual is the virtual clock of a broker for users' tests: its
	// time moves only by POST /v1/clock/advance.
	ClockVirtual = "virtual"
)

// ClockAdvance is POST /v1/clock/advance: exactly one field. By and ByMs
// move the virtual clock forward from the broker's time; To moves it to an
// absolute time. The clock never runs backwards: a negative By or a To
// before the broker's time is refused.
type ClockAdvance struct {
	// By is a Go duration, e.g. "30m".
	By string `json:"by,omitempty"`
	// ByMs is a duration in milliseconds.
	ByMs int64 `json:"by_ms,omitempty"`
	// To is the new time.
	To Millis `json:"to,omitempty"`
}

// ClockTime answers GET /v1/clock and POST /v1/clock/advance.
type ClockTime struct {
	// Mode is ClockSystem or ClockVirtual.
	Mode string `json:"mode"`
	// Now is the broker's time.
	Now     Millis `json:"now"`
	NowTime string `json:"now_time"`
	// Settled (advance only) says that, when the answer was written,
	// every message due at or before Now was visible and every schedule
	// had sent its firings due by then. It is false only if that took
	// longer than the broker waits (a herd at the dispatch rate).
	Settled bool `json:"settled"`
}
