package client

import (
	"context"
	"fmt"
	"github.com/hourglass-mq/hourglass/api"
	"net/http"
)

// Stats returns the broker's engine-wide counters and lateness quantiles.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.do(ctx, http.MethodGet, "/v1/stats", nil, &s)
	return s, err
}

// Health checks that the broker is up and serving; nil means healthy.
// /healthz needs no token.
func (c *Client) Health(ctx context.Context) error {
	var out api.Health
	if err := c.do(ctx, http.MethodGet, "/healthz", nil, &out); err != nil {
		return err
	}
	if out.Status != "ok" {
		return fmt.Errorf("hourglass client: health status is %q, not \"ok\"", out.Status)
	}
	return nil
}
