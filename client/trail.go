package client

import (
	"context"
	"net/http"

	"github.com/hourglass-mq/hourglass/api"
)

// Trail is a message's history, each event with its time, as the broker's
// commit log records it.
type Trail = api.Trail

// TrailEvent is one event of a Trail.
type TrailEvent = api.TrailEvent

// Trace returns the history of the message id names: sent, rescheduled,
// cancelled, fell due, made visible, each delivery with its group and
// attempt, nacks, lease expiries, the dead-lettering and the redrive, and
// acks. A made-up or forged ID gives a not_found error (IsNotFound).
func (c *Client) Trace(ctx context.Context, id string) (Trail, error) {
	if err := required("message id", id); err != nil {
		return Trail{}, err
	}
	var tr Trail
	err := c.do(ctx, http.MethodGet, "/v1"+path("messages", id, "trail"), nil, &tr)
	return tr, err
}
