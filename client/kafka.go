package client

import (
	"context"
	"net/http"

	"github.com/hourglass-mq/hourglass/api"
)

// KafkaCancel is the answer of a Kafka-mode cancel (CancelKey).
type KafkaCancel = api.KafkaCancel

// KafkaCancelled is KafkaCancel.State once the worker applied the cancel.
const KafkaCancelled = api.StateCancelled

// CancelKey asks a Kafka-mode worker (hourglass kafka --listen) to cancel
// every pending message with key: it writes a cancel record with the key to
// the key's delay partition and waits until the worker applied it (State
// KafkaCancelled) or a few seconds passed (State cancel_requested: it
// will be applied). It cancels the messages with the key that the worker
// has not forwarded when it reads the record (Matched: how many were
// pending when it was written). With no pending message with the key the
// answer is not_found and nothing is written; when the worker forwarded
// every one of them before the cancel, failed_precondition. An embedded
// broker answers not_found (it has no such endpoint: cancel by ID there).
func (c *Client) CancelKey(ctx context.Context, key string) (KafkaCancel, error) {
	if err := required("key", key); err != nil {
		return KafkaCancel{}, err
	}
	var out KafkaCancel
	err := c.do(ctx, http.MethodDelete, "/v1"+path("keys", key), nil, &out)
	return out, err
}
