package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/hourglass-mq/hourglass/api"
	"net/http"
)

// Send sends one message to topic and returns its receipt once the broker
// has stored it durably (in sync flush mode, after fdatasync). A send is
// retried only when the broker certainly did not receive it (see the
// package doc): after any other failure it may or may not have been stored.
func (c *Client) Send(ctx context.Context, topic string, m Message) (Receipt, error) {
	if err := required("topic", topic); err != nil {
		return Receipt{}, err
	}
	c.fillDedup(&m)
	in, err := m.wire()
	if err != nil {
		return Receipt{}, err
	}
	var r Receipt
	err = c.doRetry(ctx, http.MethodPost, "/v1"+path("topics", topic, "messages"), sendBody{&in}, receiptAnswer{&r}, m.DedupID != "")
	return r, err
}

// SendBatch sends several messages to topic in one request: all are
// stored or none is. The receipts are in the order of msgs.
func (c *Client) SendBatch(ctx context.Context, topic string, msgs []Message) ([]Receipt, error) {
	if err := required("topic", topic); err != nil {
		return nil, err
	}
	in := api.BatchRequest{Messages: make([]api.SendMessage, len(msgs))}
	safe := true
	for i, m := range msgs {
		c.fillDedup(&m)
		safe = safe && m.DedupID != ""
		var err error
		if in.Messages[i], err = m.wire(); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	var out api.BatchReceipts
	err := c.doRetry(ctx, http.MethodPost, "/v1"+path("topics", topic, "batch"), batchBody{&in}, batchAnswer{&out, len(msgs)}, safe)
	return out.Receipts, err
}

// Inspect returns the state of the message with id.
func (c *Client) Inspect(ctx context.Context, id string) (Info, error) {
	if err := required("message id", id); err != nil {
		return Info{}, err
	}
	var info Info
	err := c.do(ctx, http.MethodGet, "/v1"+path("messages", id), nil, &info)
	return info, err
}

// InspectKey returns the state of the latest message sent to topic with
// key: "where is the timeout message of order 123, and when will it fire?"
func (c *Client) InspectKey(ctx context.Context, topic, key string) (Info, error) {
	if err := required("topic", topic, "key", key); err != nil {
		return Info{}, err
	}
	var info Info
	err := c.do(ctx, http.MethodGet, "/v1"+path("topics", topic, "keys", key), nil, &info)
	return info, err
}

// Cancel cancels a pending message: it will never be delivered. A message
// already due, visible or cancelled gives a failed_precondition error
// (IsFailedPrecondition).
func (c *Client) Cancel(ctx context.Context, id string) error {
	if err := required("message id", id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, "/v1"+path("messages", id), nil, nil)
}

// Reschedule moves a pending message to w. With ifDue non-zero it is a
// compare-and-set: the broker moves the message only if its due time is
// still ifDue, else fails with failed_precondition.
func (c *Client) Reschedule(ctx context.Context, id string, w When, ifDue Millis) (Rescheduled, error) {
	if err := required("message id", id); err != nil {
		return Rescheduled{}, err
	}
	if err := w.validate(); err != nil {
		return Rescheduled{}, err
	}
	in := api.RescheduleRequest{Delivery: w.wire(), IfDue: ifDue}
	var out Rescheduled
	err := c.do(ctx, http.MethodPost, "/v1"+path("messages", id, "reschedule"), in, &out)
	return out, err
}

// fillDedup draws a dedup ID for m when the client makes every send
// idempotent and the caller gave none.
func (c *Client) fillDedup(m *Message) {
	if c.autoDedup && m.DedupID == "" {
		var b [16]byte
		rand.Read(b[:])
		m.DedupID = hex.EncodeToString(b[:])
	}
}
