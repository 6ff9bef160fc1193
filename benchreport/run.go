package benchreport

import "time"

// Run is what a bench's report says of the run as a whole: when it
// started and finished, why it ended, and the tolerance of the early
// check. Each bench's report embeds it, so the JSON names are the same in
// all of them.
type Run struct {
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	DurationS float64   `json:"duration_s"`
	// Ended says why the run stopped: EndAllArrived, EndDeadline,
	// "interrupted" or "error: ...".
	Ended string `json:"ended"`
	// EarlyToleranceMs is the tolerance of the early check: always 0, an
	// arrival before the due time by any amount counts as early.
	EarlyToleranceMs float64 `json:"early_tolerance_ms"`
}

// NewRun is the Run from started to finished that ended for the reason
// ended.
func NewRun(started, finished time.Time, ended string) Run {
	return Run{Started: started, Finished: finished, DurationS: finished.Sub(started).Seconds(), Ended: ended}
}
