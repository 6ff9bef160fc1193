package kafkamode

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxWarmTopics bounds the business topics the worker remembers having
// warmed: past it, new topics are created at their first forward, as
// before (a worker fed ever new topic names keeps a bounded set).
const maxWarmTopics = 4096

// warmQueue is how many topics may wait for warming; a topic that finds
// the queue full is not warmed (best effort, never a wait for the loop).
const warmQueue = 256

// warmTopic asks, once per topic name, for the business topic's metadata
// in the background with auto-creation allowed, when a record naming it is
// indexed: if the broker creates missing topics (auto.create.topics.enable)
// a new business topic is then created long before its first record is
// due, not inside the transaction that forwards it, where the creation
// held every record due meanwhile. Called by the loop only.
func (x *loopIndex) warmTopic(topic string) {
	if _, ok := x.warmed[topic]; ok || len(x.warmed) >= maxWarmTopics {
		return
	}
	select {
	case x.warm <- topic:
		x.warmed[topic] = struct{}{}
	default: // the queue is full: try again with the topic's next record
	}
}

// runWarmer sends the metadata requests warmTopic queued, one at a time,
// until ctx is done; it closes done when it returns. A request that fails
// changes nothing: the forward creates the topic or dead-letters the
// record, as without warming.
func (w *Worker) runWarmer(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case topic := <-w.idx.warm:
			req := kmsg.NewPtrMetadataRequest()
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, t)
			req.AllowAutoTopicCreation = true
			if _, err := w.ses.request(ctx, req); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Debug("warming a business topic failed", "topic", topic, "err", err)
			}
		}
	}
}
