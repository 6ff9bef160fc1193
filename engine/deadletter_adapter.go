package engine

import (
	"context"

	"github.com/hourglass-mq/hourglass/errs"
)

// SendDeadLetters stores reqs like SendBatch, to topics of the reserved
// dead-letter namespace: it is for a protocol adapter inside the broker
// that keeps dead letters of its own (RocketMQ's %DLQ%<group>, which its
// consumers' retries fill), never for a client's request. Every request
// must name a dead-letter topic; one that does not exist is created with
// one queue. The reserved namespace stays the broker's: clients still
// cannot send there, so every message in it was put there by the broker.
func (e *Engine) SendDeadLetters(ctx context.Context, reqs []SendRequest) ([]Receipt, error) {
	for i := range reqs {
		name := reqs[i].Message.Topic
		if !IsDeadLetterTopic(name) {
			return nil, errs.New(errs.InvalidArgument, "message %d: topic %q is not a dead-letter topic", i, name)
		}
		if e.cat.topic(name) != nil {
			continue
		}
		if _, err := e.cat.createTopic(name, TopicConfig{Queues: 1}, true); err != nil && errs.CodeOf(err) != errs.AlreadyExists {
			return nil, err
		}
	}
	return e.sendBatch(ctx, reqs, true, nil)
}
