package loadtest

import (
	"context"
	"sync"
	"time"
)

// pacer spaces sends so that they average rate messages per second over
// all producers. It does not catch up after a stall (a broker that was
// down): the rate is a ceiling, not a quota.
type pacer struct {
	rate float64 // messages per second; 0 = no pacing
	mu   sync.Mutex
	next time.Time
}

// wait blocks until n more messages may go; it returns false if ctx ended.
func (p *pacer) wait(ctx context.Context, n int) bool {
	if p.rate <= 0 {
		return ctx.Err() == nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	if d := time.Until(at); d > 0 {
		return sleepCtx(ctx, d)
	}
	return ctx.Err() == nil
}
