package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/client"

	"github.com/hourglass-mq/hourglass/benchreport"
)

// Why a run ended (Report.Ended).
const (
	endAllArrived  = benchreport.EndAllArrived
	endDeadline    = benchreport.EndDeadline
	endInterrupted = "interrupted"
)

// Message properties every bench message carries.
const (
	// propID is the bench ID: the run ID, a dash and the sequence number.
	propID = "bench_id"
	// propDue is the intended due time in Unix milliseconds.
	propDue = "bench_due"
)

// Backoff between failed requests. The cap is short on purpose: after a
// restart, the time until the bench notices the broker is back counts as
// lateness, and it should be the broker's, not the bench's.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 100 * time.Millisecond
)

// api is the part of the broker's client the bench uses; *client.Client
// implements it, and tests substitute a broker that misbehaves on purpose.
type api interface {
	Send(ctx context.Context, topic string, m client.Message) (client.Receipt, error)
	SendBatch(ctx context.Context, topic string, msgs []client.Message) ([]client.Receipt, error)
	Receive(ctx context.Context, topic, group string, opts client.ReceiveOptions) ([]client.Received, error)
	Ack(ctx context.Context, topic, group string, receipts ...string) (int, error)
	CreateTopic(ctx context.Context, name string, cfg client.TopicConfig) (client.TopicInfo, error)
	CreateGroup(ctx context.Context, topic, group string, cfg client.GroupConfig) (client.GroupInfo, error)
}

// runner is one run: it owns the producers, the consumers, the progress
// line and, in a drill, the goroutine that kills the broker. Every
// goroutine it starts has ended when run returns.
type runner struct {
	cfg    Config
	api    api
	rec    *recorder
	runID  string
	topic  string
	body   []byte
	stderr io.Writer
	// isTerminal makes the progress line rewrite itself in place.
	isTerminal bool
	// drill, when not nil, kills and restarts the broker during the run.
	drill *drill

	start  time.Time
	herdAt int64 // Unix ms, ModeHerd only

	claimed  atomic.Int64 // messages claimed by producers
	nextTier atomic.Uint64
	pace     pacer

	sendReqs, sendFailed  atomic.Int64
	sendRefused           atomic.Int64
	sendResent            atomic.Int64 // failed requests to send again with their dedup IDs
	recvReqs, recvErrors  atomic.Int64
	ackFailures           atomic.Int64
	acksCarriedAtEnd      atomic.Int64 // see ackAfterCarry
	lastSendErr, lastRecv atomic.Value // string: the latest error, for the progress line

	fatalOnce sync.Once
	fatalErr  error
	fatal     chan struct{}
}

// newRunner prepares a run of cfg against a.
func newRunner(cfg Config, a api, stderr io.Writer, isTerminal bool) *runner {
	runID := newRunID()
	topic := cfg.Topic
	if topic == "" {
		topic = "bench-" + runID
	}
	body := make([]byte, cfg.BodyBytes)
	const filler = "hourglass bench payload. "
	for i := range body {
		body[i] = filler[i%len(filler)]
	}
	return &runner{
		cfg: cfg, api: a, rec: newRecorder(cfg.N + cfg.N/8), runID: runID, topic: topic, body: body,
		stderr: stderr, isTerminal: isTerminal, pace: pacer{rate: cfg.Rate}, fatal: make(chan struct{}),
	}
}

// newRunID returns a short ID unique enough to tell runs apart: the start
// time in base 36 and a random suffix.
func newRunID() string {
	return strconv.FormatInt(time.Now().UnixMilli(), 36) + strconv.FormatUint(rand.Uint64N(36*36*36), 36)
}

// fail records the first fatal error and ends the run.
func (r *runner) fail(err error) {
	r.fatalOnce.Do(func() {
		r.fatalErr = err
		close(r.fatal)
	})
}

// run executes the run and returns its report. It returns an error only
// when the run could not start (setup failed); failures during the run
// are in the report.
func (r *runner) run(ctx context.Context) (*Report, error) {
	st, _ := r.api.(streamer)
	if r.cfg.Stream && st == nil {
		return nil, errors.New("--stream: this broker client has no streaming receive")
	}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	r.start = time.Now()
	switch {
	case r.cfg.Mode != ModeHerd:
	case r.cfg.HerdAbs:
		r.herdAt = r.cfg.HerdAt.UnixMilli()
	default:
		r.herdAt = r.start.Add(r.cfg.HerdIn).UnixMilli()
	}

	var wg sync.WaitGroup
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	consCtx, stopConsumers := context.WithCancel(runCtx)
	defer stopConsumers()
	for range r.cfg.Consumers {
		if r.cfg.Stream {
			wg.Go(func() { r.consumeStream(consCtx, st) })
		} else {
			wg.Go(func() { r.consume(consCtx) })
		}
	}
	var prodWG sync.WaitGroup
	for i := range r.cfg.Producers {
		prodWG.Go(func() { r.produce(runCtx, rand.New(rand.NewPCG(r.cfg.Seed, uint64(i)))) })
	}
	producersDone := make(chan struct{})
	go func() { prodWG.Wait(); close(producersDone) }()
	drillDone := make(chan struct{})
	if r.drill != nil {
		wg.Go(func() {
			defer close(drillDone)
			if err := r.drill.run(runCtx, r.start); err != nil {
				r.fail(err)
			}
		})
	} else {
		close(drillDone)
	}
	progStop := make(chan struct{})
	var progWG sync.WaitGroup
	if r.cfg.Progress > 0 {
		progWG.Go(func() { r.progress(progStop) })
	}

	ended := r.waitForEnd(ctx, producersDone, drillDone)
	stopConsumers()
	stopAll()
	prodWG.Wait()
	wg.Wait()
	close(progStop)
	progWG.Wait()
	return r.report(ended, time.Now()), nil
}

// setup creates the topic and the group, so that the group exists before
// the first message and a broker that does not auto-create topics works.
func (r *runner) setup(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := r.api.CreateTopic(sctx, r.topic, client.TopicConfig{}); err != nil && !client.IsAlreadyExists(err) {
		return fmt.Errorf("create topic %s: %w", r.topic, err)
	}
	if _, err := r.api.CreateGroup(sctx, r.topic, r.cfg.Group, client.GroupConfig{}); err != nil && !client.IsAlreadyExists(err) {
		return fmt.Errorf("create group %s: %w", r.cfg.Group, err)
	}
	return nil
}

// waitForEnd blocks until the run is over and says why: every
// acknowledged message arrived (and the linger passed), the deadline
// after the last due time passed, ctx ended, or a fatal error happened.
func (r *runner) waitForEnd(ctx context.Context, producersDone, drillDone <-chan struct{}) string {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var allSince time.Time
	for {
		select {
		case <-ctx.Done():
			return endInterrupted
		case <-r.fatal:
			return "error: " + r.fatalErr.Error()
		case <-tick.C:
		}
		select {
		case <-producersDone:
		default:
			continue
		}
		select {
		case <-drillDone:
		default:
			continue
		}
		now := time.Now()
		if r.rec.complete() {
			if allSince.IsZero() {
				allSince = now
			}
			if now.Sub(allSince) >= r.cfg.Linger {
				return endAllArrived
			}
			continue
		}
		last := r.rec.snapshot().maxAckedDue
		if now.UnixNano() > last+int64(r.cfg.Deadline) {
			return endDeadline
		}
	}
}

// claim takes up to r.cfg.Batch of the messages still to send; 0 means
// all are claimed. A claim is kept until its messages are acknowledged.
func (r *runner) claim() int {
	for {
		c := r.claimed.Load()
		left := int64(r.cfg.N) - c
		if left <= 0 {
			return 0
		}
		n := min(left, int64(r.cfg.Batch))
		if r.claimed.CompareAndSwap(c, c+n) {
			return int(n)
		}
	}
}

// produce is one producer: claim, pace, send. A failed send is retried
// after a backoff until it is acknowledged, the run ends, or the error is
// one a retry cannot fix. A send the broker refused (nothing reached it)
// is retried with the same bench IDs and fresh due times; any other
// failure may have stored the messages: with --dedup they are sent again
// with the same dedup IDs and due times (the broker stores each at most
// once), else they are marked failed and the retry sends new ones.
func (r *runner) produce(ctx context.Context, rng *rand.Rand) {
	for {
		n := r.claim()
		if n == 0 {
			return
		}
		if !r.pace.wait(ctx, n) {
			return
		}
		tiers := make([]uint8, n)
		if r.cfg.Mode == ModeTiers {
			for i := range tiers {
				tiers[i] = uint8((r.nextTier.Add(1) - 1) % uint64(len(r.cfg.Tiers)))
			}
		}
		backoff := minBackoff
		first := -1
		ambiguous := false // an attempt may have been stored: keep its due times
		for {
			var err error
			first, err = r.sendOnce(ctx, tiers, first, ambiguous, rng)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			if permanent(err) {
				r.fail(fmt.Errorf("send: %w", err))
				return
			}
			if !refused(err) {
				if r.cfg.Dedup {
					ambiguous = true
				} else {
					first = -1
				}
			}
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// sendOnce sends one request with a message per element of tiers, due
// from now. With reuse < 0 it records new messages; otherwise it sends
// again the messages from sequence number reuse on, with new due times, or
// with the ones they had when keepDue is set (a resend under the same
// dedup IDs must ask for the same thing). It returns the first sequence
// number.
func (r *runner) sendOnce(ctx context.Context, tiers []uint8, reuse int, keepDue bool, rng *rand.Rand) (int, error) {
	n := len(tiers)
	keepDue = keepDue && reuse >= 0
	var dues, duesMs []int64
	if keepDue {
		dues, duesMs = r.rec.dues(reuse, n), make([]int64, n)
		for i, d := range dues {
			duesMs[i] = d / int64(time.Millisecond)
		}
	} else {
		dues, duesMs = r.newDues(tiers, rng)
	}
	first := reuse
	if first < 0 {
		first = r.rec.add(dues, tiers)
	} else if !keepDue {
		r.rec.redue(first, dues)
	}
	msgs := make([]client.Message, n)
	prefix := r.runID + "-"
	for i := range msgs {
		msgs[i] = client.Message{
			Tag: "bench",
			Properties: map[string]string{
				propID:  prefix + strconv.Itoa(first+i),
				propDue: strconv.FormatInt(duesMs[i], 10),
			},
			Body: r.body,
			When: client.AtTime(time.UnixMilli(duesMs[i])),
		}
		if r.cfg.Dedup {
			msgs[i].DedupID = msgs[i].Properties[propID]
		}
	}
	r.sendReqs.Add(1)
	var err error
	if r.cfg.Batch == 1 {
		_, err = r.api.Send(ctx, r.topic, msgs[0])
	} else {
		_, err = r.api.SendBatch(ctx, r.topic, msgs)
	}
	switch {
	case err == nil:
		r.rec.sent(first, n, true, time.Now().UnixNano())
	case refused(err):
		// Nothing was stored: the entries stay pending for the retry.
		r.sendRefused.Add(1)
		r.lastSendErr.Store(err.Error())
	case r.cfg.Dedup:
		// Maybe stored: sent again with the same dedup IDs and due times,
		// so stored at most once; the entries stay pending meanwhile.
		r.sendFailed.Add(1)
		r.sendResent.Add(1)
		r.lastSendErr.Store(err.Error())
	default:
		r.rec.sent(first, n, false, time.Now().UnixNano())
		r.sendFailed.Add(1)
		r.lastSendErr.Store(err.Error())
	}
	return first, err
}

// newDues draws due times from now for a message per element of tiers, as
// Unix ns and as Unix ms.
func (r *runner) newDues(tiers []uint8, rng *rand.Rand) (dues, duesMs []int64) {
	now := time.Now()
	dues, duesMs = make([]int64, len(tiers)), make([]int64, len(tiers))
	for i := range tiers {
		switch r.cfg.Mode {
		case ModeTiers:
			duesMs[i] = ceilMs(now.Add(r.cfg.Tiers[tiers[i]]))
		case ModeSpread:
			span := int64(r.cfg.SpreadMax - r.cfg.SpreadMin)
			d := r.cfg.SpreadMin + time.Duration(rng.Int64N(span+1))
			duesMs[i] = ceilMs(now.Add(d))
		case ModeHerd:
			duesMs[i] = r.herdAt
		}
		dues[i] = duesMs[i] * int64(time.Millisecond)
	}
	return dues, duesMs
}

// refused reports whether err proves the broker did not store anything:
// the connection could not be opened, or the broker answered 429
// (resource_exhausted) or 503 (unavailable), which it gives before
// writing.
func refused(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var e *client.Error
	return errors.As(err, &e) && (e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusServiceUnavailable)
}

// ceilMs rounds t up to a whole millisecond, as Unix ms: the API's due
// times are milliseconds, and rounding up keeps the delay at least the
// tier's.
func ceilMs(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / int64(time.Millisecond)
	if ns%int64(time.Millisecond) != 0 {
		ms++
	}
	return ms
}

// sleepCtx sleeps for d or until ctx ends; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// progress prints the progress line every r.cfg.Progress until stop.
func (r *runner) progress(stop <-chan struct{}) {
	t := time.NewTicker(r.cfg.Progress)
	defer t.Stop()
	var prev counters
	prevAt := r.start
	width := 0
	for {
		select {
		case <-stop:
			if r.isTerminal && width > 0 {
				fmt.Fprintln(r.stderr)
			}
			return
		case <-t.C:
		}
		now := time.Now()
		c := r.rec.snapshotOverdue(now.UnixNano())
		secs := now.Sub(prevAt).Seconds()
		line := fmt.Sprintf("%6.1fs sent %d/%d (%.0f/s, %d refused, %d unacked) | recv %d (%.0f/s) in-flight %d overdue %d | dup %d early %d",
			now.Sub(r.start).Seconds(), c.acked, r.cfg.N, float64(c.acked-prev.acked)/secs, r.sendRefused.Load(), c.failed,
			c.arrived, float64(c.arrived-prev.arrived)/secs, c.acked-c.ackedArrived, c.overdue, c.extra, c.early)
		if r.drill != nil {
			line += " | " + r.drill.status()
		}
		prev, prevAt = c, now
		if r.isTerminal {
			pad := max(width-len(line), 0)
			fmt.Fprintf(r.stderr, "\r%s%s", line, strings.Repeat(" ", pad))
			width = len(line)
		} else {
			fmt.Fprintln(r.stderr, line)
		}
	}
}
