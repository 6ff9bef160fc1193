package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// engineSend is callers goroutines calling Send (batch 1) or SendBatch.
func (l *lab) engineSend(callers, batch int) (float64, error) {
	topic, err := l.topic("send")
	if err != nil {
		return 0, err
	}
	return during(callers, l.c.duration, func(ctx context.Context) (int, error) {
		w := message.When{Delay: l.c.delay}
		if batch == 1 {
			_, err := l.eng.Send(ctx, message.Message{Topic: topic, Body: l.body}, w)
			return 1, err
		}
		reqs := make([]engine.SendRequest, batch)
		for i := range reqs {
			reqs[i] = engine.SendRequest{Message: message.Message{Topic: topic, Body: l.body}, When: w}
		}
		_, err := l.eng.SendBatch(ctx, reqs)
		return batch, err
	})
}

// httpSend is the same through the HTTP API with package client: one
// request per message (batch 1) or per batch.
func (l *lab) httpSend(callers, batch int) (float64, error) {
	topic, err := l.topic("send")
	if err != nil {
		return 0, err
	}
	return during(callers, l.c.duration, func(ctx context.Context) (int, error) {
		m := client.Message{Body: l.body, When: client.After(l.c.delay)}
		if batch == 1 {
			_, err := l.api.Send(ctx, topic, m)
			return 1, err
		}
		msgs := make([]client.Message, batch)
		for i := range msgs {
			msgs[i] = m
		}
		_, err := l.api.SendBatch(ctx, topic, msgs)
		return batch, err
	})
}

// streamSend is c.producers goroutines sharing one HTTP send stream.
func (l *lab) streamSend() (float64, error) {
	topic, err := l.topic("send")
	if err != nil {
		return 0, err
	}
	ctx, cancel := withTimeout(l.c.duration + time.Minute)
	defer cancel()
	s, err := l.api.SendStream(ctx, topic)
	if err != nil {
		return 0, err
	}
	rate, err := during(l.c.producers, l.c.duration, func(ctx context.Context) (int, error) {
		_, err := s.Send(ctx, client.Message{Body: l.body, When: client.After(l.c.delay)})
		return 1, err
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return rate, err
}

// rmqConfig is the official client's configuration for the broker.
func (l *lab) rmqConfig(group string) *rmq.Config {
	return &rmq.Config{Endpoint: l.grpc, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

// rmqSend is c.rmqSenders goroutines sharing c.rmqProducers producers of
// the official RocketMQ 5 Go client, each message delayed like the others.
func (l *lab) rmqSend() (float64, error) {
	topic, err := l.topic("rmqsend")
	if err != nil {
		return 0, err
	}
	prods := make([]rmq.Producer, l.c.rmqProducers)
	for i := range prods {
		p, err := rmq.NewProducer(l.rmqConfig(""), rmq.WithTopics(topic))
		if err != nil {
			return 0, err
		}
		if err := p.Start(); err != nil {
			return 0, fmt.Errorf("producer start: %w", err)
		}
		defer p.GracefulStop()
		prods[i] = p
	}
	var next atomic.Int64
	return during(l.c.rmqSenders, l.c.duration, func(ctx context.Context) (int, error) {
		p := prods[next.Add(1)%int64(len(prods))]
		m := &rmq.Message{Topic: topic, Body: l.body}
		m.SetDelayTimestamp(time.Now().Add(l.c.delay))
		_, err := p.Send(ctx, m)
		return 1, err
	})
}

// prefill makes n messages visible in a fresh topic on the engine
// (prefillEngine) or the broker, and returns the topic.
func (l *lab) prefillEngine() (string, error) {
	topic, err := l.topic("recv")
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	for left := l.c.n; left > 0; left -= 1000 {
		reqs := make([]engine.SendRequest, min(left, 1000))
		for i := range reqs {
			reqs[i] = engine.SendRequest{Message: message.Message{Topic: topic, Body: l.body}}
		}
		if _, err := l.eng.SendBatch(ctx, reqs); err != nil {
			return "", err
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		ts, err := l.eng.DescribeTopic(topic)
		if err != nil {
			return "", err
		}
		if ts.Visible >= uint64(l.c.n) {
			return topic, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%d of %d visible after a minute", ts.Visible, l.c.n)
		}
	}
}

func (l *lab) prefillBroker() (string, error) {
	topic, err := l.topic("recv")
	if err != nil {
		return "", err
	}
	ctx, cancel := withTimeout(5 * time.Minute)
	defer cancel()
	for left := l.c.n; left > 0; left -= 1000 {
		msgs := make([]client.Message, min(left, 1000))
		for i := range msgs {
			msgs[i] = client.Message{Body: l.body}
		}
		if _, err := l.api.SendBatch(ctx, topic, msgs); err != nil {
			return "", err
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		ts, err := l.api.DescribeTopic(ctx, topic)
		if err != nil {
			return "", err
		}
		if ts.Visible >= uint64(l.c.n) {
			return topic, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%d of %d visible after a minute", ts.Visible, l.c.n)
		}
	}
}

// drain runs c.consumers goroutines calling recv until n messages are in
// and returns messages per second. recv gets the receipts of its previous
// batch to ack and returns the new ones.
func (l *lab) drain(recv func(ctx context.Context, ack []string) ([]string, error), final func(ctx context.Context, ack []string) error) (float64, error) {
	var received atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, l.c.consumers)
	ctx, cancel := withTimeout(5 * time.Minute)
	defer cancel()
	start := time.Now()
	for i := range l.c.consumers {
		wg.Go(func() {
			var pending []string
			for received.Load() < int64(l.c.n) && ctx.Err() == nil {
				rs, err := recv(ctx, pending)
				if err != nil {
					errs[i] = err
					cancel()
					return
				}
				received.Add(int64(len(rs)))
				pending = rs
			}
			if len(pending) > 0 {
				errs[i] = final(ctx, pending)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if got := received.Load(); got != int64(l.c.n) {
		return 0, fmt.Errorf("received %d of %d", got, l.c.n)
	}
	return float64(l.c.n) / took.Seconds(), nil
}

// engineReceive: Receive of up to c.max carrying the previous acks, the
// engine's best way to consume.
func (l *lab) engineReceive() (float64, error) {
	topic, err := l.prefillEngine()
	if err != nil {
		return 0, err
	}
	return l.drain(func(ctx context.Context, ack []string) ([]string, error) {
		got, err := l.eng.Receive(ctx, engine.ReceiveRequest{Topic: topic, Group: "bench", Max: l.c.max, Wait: 50 * time.Millisecond, Ack: ack})
		rs := make([]string, len(got))
		for i := range got {
			rs[i] = got[i].Receipt
		}
		return rs, err
	}, func(ctx context.Context, ack []string) error {
		return l.eng.Ack(ctx, topic, "bench", ack...)
	})
}

// httpReceive: the same through client.Receive, acks carried.
func (l *lab) httpReceive() (float64, error) {
	topic, err := l.prefillBroker()
	if err != nil {
		return 0, err
	}
	return l.drain(func(ctx context.Context, ack []string) ([]string, error) {
		got, err := l.api.Receive(ctx, topic, "bench", client.ReceiveOptions{Max: l.c.max, Wait: 50 * time.Millisecond, Ack: ack, BodyEncoding: client.BodyText})
		rs := make([]string, len(got))
		for i := range got {
			rs[i] = got[i].Receipt
		}
		return rs, err
	}, func(ctx context.Context, ack []string) error {
		_, err := l.api.Ack(ctx, topic, "bench", ack...)
		return err
	})
}

// httpStream: c.consumers HTTP streams (client.Stream) with batches of
// up to c.max, each acking a batch on its stream as soon as it has it.
func (l *lab) httpStream() (float64, error) {
	topic, err := l.prefillBroker()
	if err != nil {
		return 0, err
	}
	var received atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, l.c.consumers)
	start := time.Now()
	for i := range l.c.consumers {
		wg.Go(func() { errs[i] = l.streamConsumer(topic, &received) })
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if got := received.Load(); got != int64(l.c.n) {
		return 0, fmt.Errorf("received %d of %d", got, l.c.n)
	}
	return float64(l.c.n) / took.Seconds(), nil
}

// streamConsumer is one stream until all consumers together have n.
func (l *lab) streamConsumer(topic string, received *atomic.Int64) error {
	s, err := l.api.Stream(context.Background(), topic, "bench", client.StreamOptions{Max: l.c.max, BodyEncoding: client.BodyText})
	if err != nil {
		return err
	}
	defer s.Close()
	// Whoever takes the last message, every stream ends its acks between
	// two of its batches (mu), so that every batch counted is acked.
	var mu sync.Mutex
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for received.Load() < int64(l.c.n) {
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
		mu.Lock()
		defer mu.Unlock()
		_ = s.CloseSend()
	}()
	for {
		got, err := s.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rs := make([]string, len(got))
		for i := range got {
			rs[i] = got[i].Receipt
		}
		mu.Lock()
		received.Add(int64(len(got)))
		err = s.Ack(rs...)
		mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// rmqReceive: one SimpleConsumer of the official client, c.consumers
// goroutines receiving up to c.max, and as many acking each message on
// its own (the client acks one message per call). The side ends when
// every message is received and acked.
func (l *lab) rmqReceive() (float64, error) {
	topic, err := l.prefillBroker()
	if err != nil {
		return 0, err
	}
	c, err := rmq.NewSimpleConsumer(l.rmqConfig("bench-"+topic),
		rmq.WithSimpleAwaitDuration(time.Second),
		rmq.WithSimpleReceiveRateLimit(l.c.consumers),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		return 0, err
	}
	if err := c.Start(); err != nil {
		return 0, fmt.Errorf("consumer start: %w", err)
	}
	defer c.GracefulStop()
	acks := make(chan *rmq.MessageView, l.c.n)
	var received, acked atomic.Int64
	var wg, ackers sync.WaitGroup
	errs := make([]error, 2*l.c.consumers)
	ctx, cancel := withTimeout(5 * time.Minute)
	defer cancel()
	start := time.Now()
	for i := range l.c.consumers {
		ackers.Go(func() {
			for mv := range acks {
				if err := c.Ack(ctx, mv); err != nil && errs[l.c.consumers+i] == nil {
					errs[l.c.consumers+i] = err
				}
				acked.Add(1)
			}
		})
		wg.Go(func() {
			for received.Load() < int64(l.c.n) && ctx.Err() == nil {
				mvs, err := c.Receive(ctx, int32(l.c.max), 30*time.Second)
				var st *rmq.ErrRpcStatus
				if errors.As(err, &st) && st.Code == int32(pb.Code_MESSAGE_NOT_FOUND) {
					continue
				}
				if err != nil {
					errs[i] = err
					cancel()
					return
				}
				received.Add(int64(len(mvs)))
				for _, mv := range mvs {
					acks <- mv
				}
			}
		})
	}
	wg.Wait()
	close(acks)
	ackers.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if got := received.Load(); got != int64(l.c.n) || acked.Load() != got {
		return 0, fmt.Errorf("received %d and acked %d of %d", got, acked.Load(), l.c.n)
	}
	return float64(l.c.n) / took.Seconds(), nil
}
