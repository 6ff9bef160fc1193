package client

import (
	"context"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/api"
)

// ClockTime is the broker's clock mode and time (package api's).
type ClockTime = api.ClockTime

// Clock returns the broker's clock mode ("system" or "virtual") and time.
func (c *Client) Clock(ctx context.Context) (ClockTime, error) {
	var out ClockTime
	err := c.do(ctx, http.MethodGet, "/v1/clock", nil, &out)
	return out, err
}

// AdvanceClock moves the virtual clock of a broker started with -clock
// virtual forward by d (not negative) and returns once what fell due is
// visible (ClockTime.Settled). On a broker on the system clock it fails
// with failed_precondition (IsFailedPrecondition).
func (c *Client) AdvanceClock(ctx context.Context, d time.Duration) (ClockTime, error) {
	var out ClockTime
	err := c.do(ctx, http.MethodPost, "/v1/clock/advance", api.ClockAdvance{By: d.String()}, &out)
	return out, err
}

// AdvanceClockTo moves the virtual clock forward to t, which must not be
// before the broker's time; otherwise as AdvanceClock.
func (c *Client) AdvanceClockTo(ctx context.Context, t time.Time) (ClockTime, error) {
	var out ClockTime
	err := c.do(ctx, http.MethodPost, "/v1/clock/advance", api.ClockAdvance{To: api.MillisOf(t)}, &out)
	return out, err
}
