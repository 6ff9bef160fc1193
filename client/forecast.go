package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hourglass-mq/hourglass/api"
)

// Forecast is the answer of a forecast: pending counts per future bucket.
type Forecast = api.Forecast

// ForecastBucket is one bucket of a Forecast.
type ForecastBucket = api.ForecastBucket

// BodyPreview is the start of a message's body (Preview).
type BodyPreview = api.BodyPreview

// ForecastRequest asks how many pending messages fall due per bucket.
// Zero values take the broker's defaults: every topic, from now, for an
// hour, by the minute.
type ForecastRequest struct {
	Topic string
	// From and To are Unix ms; To is exclusive.
	From, To int64
	// Step is a word (second, minute, hour, day) or a duration of whole
	// seconds such as "30s", "5m", "7d".
	Step string
}

// Forecast returns the pending counts per bucket of r.
func (c *Client) Forecast(ctx context.Context, r ForecastRequest) (Forecast, error) {
	q := url.Values{}
	if r.Topic != "" {
		q.Set("topic", r.Topic)
	}
	if r.From != 0 {
		q.Set("from", strconv.FormatInt(r.From, 10))
	}
	if r.To != 0 {
		q.Set("to", strconv.FormatInt(r.To, 10))
	}
	if r.Step != "" {
		q.Set("step", r.Step)
	}
	p := "/v1/forecast"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out Forecast
	err := c.do(ctx, http.MethodGet, p, nil, &out)
	return out, err
}

// Preview returns the first bytes of a message's body (at most
// api.MaxPreviewBytes), in any state.
func (c *Client) Preview(ctx context.Context, id string) (BodyPreview, error) {
	var out BodyPreview
	err := c.do(ctx, http.MethodGet, path("v1", "messages", id, "preview"), nil, &out)
	return out, err
}
