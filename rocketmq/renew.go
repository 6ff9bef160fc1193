package rocketmq

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

// Defaults of Options.AutoRenewLease and Options.AutoRenewMax.
const (
	// DefaultAutoRenewLease is the lease of a message received with
	// auto_renew. It is renewed every third of itself while its client
	// lives, so a consumer that dies gives its messages back within one
	// lease, while a slow listener keeps them.
	DefaultAutoRenewLease = 30 * time.Second
	// DefaultAutoRenewMax bounds how long a message is renewed: a listener
	// stuck for longer loses it, and it is delivered again.
	DefaultAutoRenewMax = time.Hour
)

// renewer keeps alive the leases of messages received with auto_renew
// (push consumers), until the client acks them, takes the lease over with
// ChangeInvisibleDuration, goes away (its telemetry stream ends or it
// says it terminates), or AutoRenewMax passes. It owns the set of renewed
// receipts; the engine owns the leases themselves.
type renewer struct {
	eng          *engine.Engine
	lease, limit time.Duration

	mu   sync.Mutex
	held map[string]renewal // by receipt

	// renewals counts successful renewals (tests wait on it; a metric).
	renewals atomic.Int64
}

// renewal is one message whose lease is being renewed.
type renewal struct {
	client, topic, group string
	since                time.Time
}

func newRenewer(eng *engine.Engine, lease, limit time.Duration) *renewer {
	return &renewer{eng: eng, lease: lease, limit: limit, held: map[string]renewal{}}
}

// add starts renewing the leases of receipts, received by client.
func (r *renewer) add(client, topic, group string, receipts []string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rc := range receipts {
		r.held[rc] = renewal{client: client, topic: topic, group: group, since: now}
	}
}

// drop stops renewing receipt (acked, or its lease taken over).
func (r *renewer) drop(receipt string) {
	r.mu.Lock()
	delete(r.held, receipt)
	r.mu.Unlock()
}

// forget stops renewing every lease of client: they end within one lease
// and the messages are delivered again.
func (r *renewer) forget(client string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for rc, h := range r.held {
		if h.client == client {
			delete(r.held, rc)
		}
	}
}

// count returns how many leases are being renewed.
func (r *renewer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// run renews every held lease each third of a lease until done closes.
func (r *renewer) run(done <-chan struct{}) {
	t := time.NewTicker(r.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			r.renewAll()
		}
	}
}

// renewAll extends each held lease to a full lease from now. A receipt the
// engine refuses (acked through another path, expired, from before a
// restart) is dropped; so is one held for longer than the limit.
func (r *renewer) renewAll() {
	now := time.Now()
	r.mu.Lock()
	due := make(map[string]renewal, len(r.held))
	for rc, h := range r.held {
		if now.Sub(h.since) >= r.limit {
			delete(r.held, rc)
			continue
		}
		due[rc] = h
	}
	r.mu.Unlock()
	for rc, h := range due {
		if !r.renewOne(rc, h) {
			r.drop(rc)
			continue
		}
	}
}

// renewOne extends one lease if it is still held, holding the renewer's
// lock across the extension: a drop (an ack, or a ChangeInvisibleDuration
// from the client, which sets its own lease right after) then waits for
// it, so a renewal never overwrites the client's duration. The engine
// never calls the renewer, so the lock order renewer, engine holds. It
// reports false when the engine refused the receipt.
func (r *renewer) renewOne(rc string, h renewal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, held := r.held[rc]; !held {
		return true // dropped since the snapshot: the client's to set
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.lease/3)
	defer cancel()
	if err := r.eng.ChangeInvisibility(ctx, h.topic, h.group, rc, r.lease); err != nil {
		return false
	}
	r.renewals.Add(1)
	return true
}
