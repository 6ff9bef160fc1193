package client

import (
	"context"
	"github.com/hourglass-mq/hourglass/api"
	"net/http"
	"time"
)

// Receive leases up to opts.Max visible messages of topic for group,
// waiting up to opts.Wait for the first one, after acking opts.Ack (see
// ReceiveOptions). It returns an empty slice, not an error, when the wait
// ends with nothing. Each message stays invisible to the group for
// opts.Invisible; ack it before then, or it is delivered again. An
// unknown group is created with the defaults.
func (c *Client) Receive(ctx context.Context, topic, group string, opts ReceiveOptions) ([]Received, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return nil, err
	}
	in := opts.wire()
	var out receiveAnswer
	err := c.do(ctx, http.MethodPost, "/v1"+path("topics", topic, "groups", group, "receive"), in, &out)
	if err != nil {
		return nil, err
	}
	if out.Messages == nil {
		out.Messages = []Received{}
	}
	return out.Messages, nil
}

// Ack acknowledges received messages by receipt: all or nothing. An
// unknown or expired receipt gives a not_found error and acks none.
func (c *Client) Ack(ctx context.Context, topic, group string, receipts ...string) (int, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return 0, err
	}
	in := api.AckRequest{Receipts: receipts}
	var out api.AckResponse
	err := c.do(ctx, http.MethodPost, "/v1"+path("topics", topic, "groups", group, "ack"), in, &out)
	return out.Acked, err
}

// Nack gives a received message back for redelivery after delay; zero
// delay means the group's backoff for the message's attempt.
func (c *Client) Nack(ctx context.Context, topic, group, receipt string, delay time.Duration) error {
	if err := required("topic", topic, "group", group, "receipt", receipt); err != nil {
		return err
	}
	in := api.NackRequest{Receipt: receipt, Delay: durationString(delay)}
	return c.do(ctx, http.MethodPost, "/v1"+path("topics", topic, "groups", group, "nack"), in, &api.Empty{})
}

// ChangeInvisibility sets a received message's lease to end d from now:
// extend it for slow work, or shorten it.
func (c *Client) ChangeInvisibility(ctx context.Context, topic, group, receipt string, d time.Duration) error {
	if err := required("topic", topic, "group", group, "receipt", receipt); err != nil {
		return err
	}
	in := api.InvisibilityRequest{Receipt: receipt, Invisible: d.String()}
	return c.do(ctx, http.MethodPost, "/v1"+path("topics", topic, "groups", group, "invisibility"), in, &api.Empty{})
}

// Redrive moves up to max messages from group's dead-letter topic back to
// topic and returns how many it moved. Zero max means the broker's default.
func (c *Client) Redrive(ctx context.Context, topic, group string, max int) (int, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return 0, err
	}
	in := api.RedriveRequest{Max: max}
	var out api.RedriveResponse
	err := c.do(ctx, http.MethodPost, "/v1"+path("topics", topic, "groups", group, "redrive"), in, &out)
	return out.Redriven, err
}

// durationString is "" for zero (the field is then omitted: the broker's
// default) and Go syntax otherwise.
func durationString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
