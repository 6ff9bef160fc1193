package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// receivers are the goroutines receiving from one consumer and those
// acking what they received.
type receivers struct {
	recv, acks sync.WaitGroup
	ackCh      chan *rmq.MessageView
	waitOnce   sync.Once
	errs       atomic.Int64
	ackErrs    atomic.Int64
	mu         sync.Mutex
	firstErr   string
}

func (r *receivers) firstError() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstErr
}

// startReceivers starts cfg.receivers long-polling loops until ctx ends,
// and cfg.ackers goroutines acking what they receive.
func startReceivers(ctx context.Context, cfg config, c rmq.SimpleConsumer, col *collector) *receivers {
	r := &receivers{ackCh: make(chan *rmq.MessageView, cfg.n)}
	for range cfg.ackers {
		r.acks.Go(func() {
			for mv := range r.ackCh {
				actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := c.Ack(actx, mv); err != nil {
					r.ackErrs.Add(1)
				}
				cancel()
			}
		})
	}
	for range cfg.receivers {
		r.recv.Go(func() {
			for ctx.Err() == nil {
				mvs, err := c.Receive(ctx, int32(cfg.batch), cfg.invisible)
				now := time.Now()
				if err != nil {
					r.receiveFailed(ctx, err)
					continue
				}
				for _, mv := range mvs {
					col.add(mv.GetBody(), now)
					r.ackCh <- mv
				}
			}
		})
	}
	return r
}

// receiveFailed counts a failed Receive, unless it is an empty long poll
// or the end of the phase, and pauses briefly so that a broker that keeps
// refusing is not hammered.
func (r *receivers) receiveFailed(ctx context.Context, err error) {
	var st *rmq.ErrRpcStatus
	if ctx.Err() != nil || (errors.As(err, &st) && st.Code == int32(pb.Code_MESSAGE_NOT_FOUND)) {
		return
	}
	r.errs.Add(1)
	r.mu.Lock()
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
	r.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

// wait returns once the receivers have ended (their context must be done)
// and the ack queue is drained. It may be called more than once.
func (r *receivers) wait() {
	r.waitOnce.Do(func() {
		r.recv.Wait()
		close(r.ackCh)
		r.acks.Wait()
	})
}
