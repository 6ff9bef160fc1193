package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Header names. The Nats-Schedule family is nats-server's (2.12 and
// later): a message published to a stream with AllowMsgSchedules, on a
// subject of its own, with Nats-Schedule "@at <RFC 3339 time>" and a
// Nats-Schedule-Target, is stored as a schedule; at that time the server
// publishes a copy of it (its headers but the schedule's, and its body)
// to the target subject and purges the schedule.
const (
	hdrSchedule = "Nats-Schedule"
	hdrTarget   = "Nats-Schedule-Target"
	// hdrBenchID carries the message's sequence number in the run.
	hdrBenchID = "Bench-Id"
)

// consumerName is the durable pull consumer all the bench's consumers
// share, as the consumers of `hourglass bench` share one group.
const consumerName = "bench"

// Backoff after a failed request, as in `hourglass bench`.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 100 * time.Millisecond
)

// bench is one run against one NATS server. Every goroutine it starts
// has ended when run returns.
type bench struct {
	cfg    config
	url    string
	runID  string
	stream string
	body   []byte
	rec    *recorder
	atMs   int64 // the herd's instant, Unix ms
	start  time.Time

	claimed                            atomic.Int64
	pubRequests, pubFailed             atomic.Int64
	recvRequests, recvErrors, ackFails atomic.Int64
}

// subject names: one schedule subject per message (JetStream keeps one
// schedule per subject), one target subject the consumer filters on.
func (b *bench) schedSubject(seq int) string {
	return "herd." + b.runID + ".sched." + strconv.Itoa(seq)
}

func (b *bench) targetSubject() string { return "herd." + b.runID + ".due" }

// newBench prepares a run of cfg against the server at url.
func newBench(cfg config, url string) *bench {
	runID := strconv.FormatInt(time.Now().UnixMilli(), 36) + strconv.FormatUint(rand.Uint64N(36*36*36), 36)
	body := make([]byte, cfg.bodyBytes)
	const filler = "natsherd bench payload. "
	for i := range body {
		body[i] = filler[i%len(filler)]
	}
	return &bench{cfg: cfg, url: url, runID: runID, stream: "HERD_" + runID, body: body}
}

// setup creates the stream and the durable consumer.
func (b *bench) setup(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     b.stream,
		Subjects: []string{"herd." + b.runID + ".sched.*", b.targetSubject()},
		Storage:  jetstream.FileStorage,
		Replicas: 1,
		// Schedules need roll-ups: the server purges a fired schedule
		// with one.
		AllowMsgSchedules: true,
		AllowRollup:       true,
	})
	if err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	_, err = js.CreateConsumer(ctx, b.stream, jetstream.ConsumerConfig{
		Durable:       consumerName,
		FilterSubject: b.targetSubject(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.cfg.invisible,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: b.cfg.maxAckPending,
	})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	return nil
}

// run executes the run: it connects, creates the stream and consumer,
// starts the consumers and producers, waits for the end and returns the
// entries and why it ended.
func (b *bench) run(ctx context.Context) (ended string, err error) {
	pubConn, err := nats.Connect(b.url, nats.Name("natsherd producers"))
	if err != nil {
		return "", err
	}
	defer pubConn.Close()
	js, err := jetstream.New(pubConn)
	if err != nil {
		return "", err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = b.setup(sctx, js)
	cancel()
	if err != nil {
		return "", err
	}
	consumers := make([]jetstream.Consumer, b.cfg.consumers)
	for i := range consumers {
		// A connection per consumer, as each consumer of `hourglass bench`
		// has its own long poll.
		nc, err := nats.Connect(b.url, nats.Name("natsherd consumer "+strconv.Itoa(i)))
		if err != nil {
			return "", err
		}
		defer nc.Close()
		cjs, err := jetstream.New(nc)
		if err != nil {
			return "", err
		}
		if consumers[i], err = cjs.Consumer(ctx, b.stream, consumerName); err != nil {
			return "", err
		}
	}

	b.start = time.Now()
	b.atMs = b.start.Add(b.cfg.herdIn).UnixMilli()
	b.rec = newRecorder(b.cfg.n, b.atMs*int64(time.Millisecond))

	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	var cons sync.WaitGroup
	for _, c := range consumers {
		cons.Go(func() { b.consume(runCtx, c) })
	}
	var prod sync.WaitGroup
	for range b.cfg.producers {
		pjs, err := jetstream.New(pubConn)
		if err != nil {
			stopAll()
			cons.Wait()
			return "", err
		}
		prod.Go(func() { b.produce(runCtx, pjs) })
	}
	prodDone := make(chan struct{})
	go func() { prod.Wait(); close(prodDone) }()
	ended = b.waitForEnd(ctx, prodDone)
	stopAll()
	prod.Wait()
	cons.Wait()
	return ended, nil
}

// waitForEnd returns when every message was published and every
// acknowledged one arrived ("all arrived"), when the deadline after the
// instant passed ("deadline"), or when ctx ended ("interrupted").
func (b *bench) waitForEnd(ctx context.Context, prodDone <-chan struct{}) string {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	limit := time.UnixMilli(b.atMs).Add(b.cfg.deadline)
	for {
		select {
		case <-ctx.Done():
			return "interrupted"
		case <-tick.C:
		}
		select {
		case <-prodDone:
		default:
			continue
		}
		if b.rec.complete() {
			return "all arrived"
		}
		if time.Now().After(limit) {
			return "deadline"
		}
	}
}

// claim takes up to cfg.batch of the messages still to publish and
// returns the first sequence number and the count (0 when none is left).
func (b *bench) claim() (int, int) {
	for {
		c := b.claimed.Load()
		left := int64(b.cfg.n) - c
		if left <= 0 {
			return 0, 0
		}
		n := min(left, int64(b.cfg.batch))
		if b.claimed.CompareAndSwap(c, c+n) {
			return int(c), int(n)
		}
	}
}

// produce is one producer: it publishes its claims as batches of
// asynchronous publishes and waits for their PubAcks, like a batch send
// of `hourglass bench`. A publish that failed is published again with
// the same Nats-Msg-Id, so JetStream stores it at most once (the bench's
// --dedup), until it is acknowledged or the run ends.
func (b *bench) produce(ctx context.Context, js jetstream.JetStream) {
	at := time.UnixMilli(b.atMs).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	for {
		first, n := b.claim()
		if n == 0 {
			return
		}
		todo := make([]int, n)
		for i := range todo {
			todo[i] = first + i
		}
		backoff := minBackoff
		for len(todo) > 0 {
			todo = b.publishBatch(ctx, js, todo, at)
			if ctx.Err() != nil {
				return
			}
			if len(todo) > 0 {
				if !sleepCtx(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, maxBackoff)
			}
		}
	}
}

// publishBatch publishes the messages seqs asynchronously, waits for
// every answer, records the acknowledged ones and returns those to try
// again.
func (b *bench) publishBatch(ctx context.Context, js jetstream.JetStream, seqs []int, at string) []int {
	b.pubRequests.Add(1)
	futures := make([]jetstream.PubAckFuture, len(seqs))
	var retry []int
	for i, seq := range seqs {
		m := nats.NewMsg(b.schedSubject(seq))
		m.Header.Set(hdrSchedule, "@at "+at)
		m.Header.Set(hdrTarget, b.targetSubject())
		m.Header.Set(hdrBenchID, strconv.Itoa(seq))
		m.Header.Set(jetstream.MsgIDHeader, b.runID+"-"+strconv.Itoa(seq))
		m.Data = b.body
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			b.pubFailed.Add(1)
			retry = append(retry, seq)
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
			b.rec.sent(seqs[i], true, time.Now().UnixNano())
		case <-f.Err():
			b.pubFailed.Add(1)
			retry = append(retry, seqs[i])
		case <-ctx.Done():
			return nil
		}
	}
	return retry
}

// consume is one consumer: it fetches up to cfg.max messages with a
// long poll of cfg.wait, records each message's arrival as the client
// hands it over, and acks each one (explicit acks). An arrival here is
// the moment the message reaches the consumer's code, as it is in
// `hourglass bench` (there, the moment the receive returns its batch).
func (b *bench) consume(ctx context.Context, c jetstream.Consumer) {
	backoff := minBackoff
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, b.cfg.wait)
		b.recvRequests.Add(1)
		batch, err := c.Fetch(b.cfg.max, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return
			}
			b.recvErrors.Add(1)
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		for m := range batch.Messages() {
			now := time.Now().UnixNano()
			seq, perr := strconv.Atoi(m.Headers().Get(hdrBenchID))
			if perr != nil {
				seq = -1
			}
			var delivered uint64 = 1
			var stored int64
			if md, err := m.Metadata(); err == nil {
				delivered, stored = md.NumDelivered, md.Timestamp.UnixNano()
			}
			b.rec.arrive(seq, now, stored, delivered)
			if err := m.Ack(); err != nil {
				b.ackFails.Add(1)
			}
		}
		cancel()
		if err := batch.Error(); err != nil && ctx.Err() == nil && !timeout(err) {
			b.recvErrors.Add(1)
		}
	}
}

// timeout reports whether err is only the end of a long poll that found
// fewer messages than it asked for.
func timeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoMessages)
}

// sleepCtx sleeps for d or until ctx ends; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	// A timer of time.After is collected once it is unreachable (Go 1.23).
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return ctx.Err() == nil
}
