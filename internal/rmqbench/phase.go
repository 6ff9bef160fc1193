package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/hourglass-mq/hourglass/benchreport"
)

// phase names a phase in the body and the report.
type phase byte

const (
	phaseSpread phase = 's'
	phaseHerd   phase = 'h'
	// phaseWarmup marks the messages sent before the spread to warm both
	// sides up and to learn the send rate; they are received, not measured.
	phaseWarmup phase = 'w'
)

func (p phase) String() string {
	if p == phaseHerd {
		return "herd"
	}
	return "spread"
}

// headerSize is the body's fixed prefix; see the package doc.
const headerSize = 29

const magic = "rmqbench"

// encodeBody builds a body of size bytes (at least headerSize).
func encodeBody(size int, p phase, nonce uint64, idx uint32, dueMs int64) []byte {
	b := make([]byte, size)
	copy(b, magic)
	b[8] = byte(p)
	binary.BigEndian.PutUint64(b[9:], nonce)
	binary.BigEndian.PutUint32(b[17:], idx)
	binary.BigEndian.PutUint64(b[21:], uint64(dueMs))
	for i := headerSize; i < size; i++ {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// decodeBody reads a body of encodeBody; ok is false for anything else.
func decodeBody(b []byte) (p phase, nonce uint64, idx uint32, dueMs int64, ok bool) {
	if len(b) < headerSize || string(b[:8]) != magic {
		return 0, 0, 0, 0, false
	}
	return phase(b[8]), binary.BigEndian.Uint64(b[9:]), binary.BigEndian.Uint32(b[17:]),
		int64(binary.BigEndian.Uint64(b[21:])), true
}

// phaseResult is what one phase measured. Times are milliseconds.
type phaseResult struct {
	Topic          string               `json:"topic"`
	WarmupSent     int                  `json:"warmup_sent,omitempty"` // spread: sent before it
	WarmupRate     float64              `json:"warmup_rate,omitempty"` // their send rate, msgs/s
	Group          string               `json:"group"`
	LeadSec        float64              `json:"lead_s"`
	Instant        *time.Time           `json:"instant,omitempty"` // herd: when all are due
	Sent           int                  `json:"sent"`              // acknowledged sends
	SendErrors     int                  `json:"send_errors"`
	FirstSendError string               `json:"first_send_error,omitempty"`
	SentLate       int                  `json:"sent_late"` // acknowledged after their delivery timestamp
	SendSeconds    float64              `json:"send_s"`
	SendRate       float64              `json:"send_rate"` // acknowledged sends per second
	SendLatency    benchreport.Lateness `json:"send_latency_ms"`
	Received       int                  `json:"received"` // distinct messages of this run
	Lost           int                  `json:"lost"`     // sent, not received by the deadline
	Early          int                  `json:"early"`    // arrived before the delivery timestamp
	Duplicates     int                  `json:"duplicates"`
	Foreign        int                  `json:"foreign"` // messages of another run or phase
	ReceiveErrors  int                  `json:"receive_errors"`
	FirstRecvError string               `json:"first_receive_error,omitempty"`
	AckErrors      int                  `json:"ack_errors"`
	Lateness       benchreport.Lateness `json:"lateness_ms"` // arrival - delivery timestamp
	// The remoting bench (Bench.java) also reports lateness with due
	// counted from the send's answer (a lower bound), and from the
	// broker's store time (the storeTimestamp of the message the send's
	// offset message ID names: what a level's delay counts from), the
	// arrivals before that, and arrival - the pushed message's
	// storeTimestamp (when the broker made it consumable).
	LatenessFromAck   *benchreport.Lateness `json:"lateness_from_ack_ms,omitempty"`
	LatenessFromStore *benchreport.Lateness `json:"lateness_from_store_ms,omitempty"`
	EarlyFromStore    int                   `json:"early_from_store,omitempty"`
	FromPushedStore   *benchreport.Lateness `json:"from_pushed_store_ms,omitempty"`
	ViewErrors        int                   `json:"view_errors,omitempty"` // store times not read back
	HerdFirstMs       float64               `json:"herd_first_ms,omitempty"`
	HerdLastMs        float64               `json:"herd_last_ms,omitempty"`
	Broker            *brokerLateness       `json:"broker_lateness,omitempty"` // hourglass only, with -metrics
	Load              loadStats             `json:"load"`
}

// collector records the first arrival of each message of one phase.
type collector struct {
	p     phase
	nonce uint64

	mu       sync.Mutex
	arrived  []int64 // by index: arrival, Unix ns; 0 not yet
	dueMs    []int64 // by index: the delivery timestamp the body carried
	received int
	dups     int
	foreign  int
	warmup   int
}

func newCollector(p phase, nonce uint64, n int) *collector {
	return &collector{p: p, nonce: nonce, arrived: make([]int64, n), dueMs: make([]int64, n)}
}

// add records one delivered body that arrived at now.
func (c *collector) add(body []byte, now time.Time) {
	p, nonce, idx, due, ok := decodeBody(body)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case ok && p == phaseWarmup && nonce == c.nonce:
		c.warmup++
	case !ok || p != c.p || nonce != c.nonce || int(idx) >= len(c.arrived):
		c.foreign++
	case c.arrived[idx] != 0:
		c.dups++
	default:
		c.arrived[idx] = now.UnixNano()
		c.dueMs[idx] = due
		c.received++
	}
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.received
}

// sendStats is what the senders of a phase saw.
type sendStats struct {
	ok        []bool // by index: acknowledged
	sent      int
	errs      int
	firstErr  string
	late      int
	latencies []int64 // ns
	start     time.Time
	end       time.Time
}

// runPhase runs one phase: a consumer group receiving, the sends, then the
// wait for every acknowledged message until the last delivery timestamp
// plus the grace. lead is the herd's lead (ignored for the spread).
func runPhase(ctx context.Context, cfg config, p phase, progress io.Writer, lead time.Duration) (phaseResult, error) {
	topic := cfg.spreadTopic
	if p == phaseHerd {
		topic = cfg.herdTopic
	}
	res := phaseResult{Topic: topic, Group: cfg.group + "-" + topic}
	load := startLoadSampler()
	defer load.stop() // on an early return
	col := newCollector(p, rand.Uint64(), cfg.n)

	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	cons, err := startConsumer(cfg, res.Group, topic)
	if err != nil {
		return res, err
	}
	defer cons.GracefulStop()
	rs := startReceivers(recvCtx, cfg, cons, col)
	defer func() { // on an early return; a no-op after the normal end
		stopRecv()
		rs.wait()
	}()
	prods, err := startProducers(cfg, topic)
	defer func() {
		for _, pr := range prods {
			pr.GracefulStop()
		}
	}()
	if err != nil {
		return res, err
	}

	if p == phaseSpread && cfg.warmup > 0 {
		lead = warmup(ctx, cfg, prods, topic, col.nonce, &res, progress)
	}

	var before bucketCounts
	if cfg.metrics != "" {
		if before, err = readBuckets(cfg.metrics); err != nil {
			return res, fmt.Errorf("-metrics: %w", err)
		}
	}

	// The due times: the spread from start+lead at millisecond steps, the
	// herd at one whole second far enough ahead for the sends to finish.
	dueOf, lastDue := dueTimes(cfg, p, time.Now(), lead, &res)
	fmt.Fprintf(progress, "%s %s: sending %d to %s, last due in %.1fs\n",
		cfg.system, p, cfg.n, topic, time.Until(time.UnixMilli(lastDue)).Seconds())
	ss := send(ctx, cfg, prods, topic, p, col.nonce, cfg.n, dueOf)
	fmt.Fprintf(progress, "%s %s: %d sent in %.2fs (%d errors); waiting\n",
		cfg.system, p, ss.sent, ss.end.Sub(ss.start).Seconds(), ss.errs)

	deadline := time.UnixMilli(lastDue).Add(cfg.grace)
	stopProfile := profileDrain(cfg, p, res.Instant, progress)
	err = awaitCollected(ctx, col, ss.sent, deadline)
	stopProfile()
	if err != nil {
		return res, err
	}
	stopRecv()
	rs.wait()
	res.Load = load.stop()
	if before != nil {
		after, err := readBuckets(cfg.metrics)
		if err != nil {
			return res, fmt.Errorf("-metrics: %w", err)
		}
		bl := since(before, after)
		res.Broker = &bl
	}
	fill(&res, cfg, ss, col, rs)
	return res, nil
}

// fill computes the result from what the senders, collector and receivers
// saw.
func fill(res *phaseResult, cfg config, ss sendStats, col *collector, rs *receivers) {
	res.Sent, res.SendErrors, res.FirstSendError, res.SentLate = ss.sent, ss.errs, ss.firstErr, ss.late
	res.SendSeconds = ss.end.Sub(ss.start).Seconds()
	if res.SendSeconds > 0 {
		res.SendRate = float64(ss.sent) / res.SendSeconds
	}
	res.SendLatency = benchreport.Summarize(ss.latencies)
	res.ReceiveErrors, res.FirstRecvError, res.AckErrors = int(rs.errs.Load()), rs.firstError(), int(rs.ackErrs.Load())

	col.mu.Lock()
	defer col.mu.Unlock()
	res.Received, res.Duplicates, res.Foreign = col.received, col.dups, col.foreign
	lateness := make([]int64, 0, col.received)
	var first, last int64
	for i, at := range col.arrived {
		if at == 0 {
			if ss.ok[i] {
				res.Lost++
			}
			continue
		}
		late := at - col.dueMs[i]*int64(time.Millisecond)
		if late < 0 {
			res.Early++
		}
		lateness = append(lateness, late)
		if first == 0 || at < first {
			first = at
		}
		last = max(last, at)
	}
	res.Lateness = benchreport.Summarize(lateness)
	if res.Instant != nil && first != 0 {
		res.HerdFirstMs = float64(first-res.Instant.UnixNano()) / 1e6
		res.HerdLastMs = float64(last-res.Instant.UnixNano()) / 1e6
	}
}

func creds() *credentials.SessionCredentials { return &credentials.SessionCredentials{} }

// startBounded runs a client's Start, which blocks until the broker sends
// the client's settings, and gives up after 30 s.
func startBounded(what string, start func() error) error {
	done := make(chan error, 1)
	go func() { done <- start() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: Start: %w", what, err)
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: Start did not return in 30s (no settings from the broker)", what)
	}
}

func startConsumer(cfg config, group, topic string) (rmq.SimpleConsumer, error) {
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: cfg.endpoint, ConsumerGroup: group, Credentials: creds()},
		rmq.WithSimpleAwaitDuration(cfg.await),
		rmq.WithSimpleReceiveRateLimit(cfg.receivers),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		return nil, err
	}
	return c, startBounded("consumer", c.Start)
}

// startProducers starts cfg.producers clients; on an error it returns the
// ones started so far, which the caller stops.
func startProducers(cfg config, topic string) ([]rmq.Producer, error) {
	var prods []rmq.Producer
	for range cfg.producers {
		pr, err := rmq.NewProducer(&rmq.Config{Endpoint: cfg.endpoint, Credentials: creds()}, rmq.WithTopics(topic))
		if err != nil {
			return prods, err
		}
		if err := startBounded("producer", pr.Start); err != nil {
			return prods, err
		}
		prods = append(prods, pr)
	}
	return prods, nil
}

// warmup sends cfg.warmup messages due in 1 s before the spread (and waits
// until 200 ms after that due time), so that
// neither side is measured cold (RocketMQ's JVMs sent 3 to 4 times slower
// in their first seconds here), and returns the spread's lead: 1.5 times
// the time cfg.n sends take at the warm-up's rate, so that the spread's
// sends finish before their delivery timestamps on a slow broker too.
func warmup(ctx context.Context, cfg config, prods []rmq.Producer, topic string, nonce uint64, res *phaseResult, progress io.Writer) time.Duration {
	due := time.Now().Add(time.Second).UnixMilli()
	ws := send(ctx, cfg, prods, topic, phaseWarmup, nonce, cfg.warmup, func(int) int64 { return due })
	res.WarmupSent = ws.sent
	// Let the warm-up be delivered before the spread begins, so that it
	// competes with neither the spread's sends nor its broker-side figures.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(time.UnixMilli(due).Add(200 * time.Millisecond))):
	}
	secs := ws.end.Sub(ws.start).Seconds()
	if ws.sent == 0 || secs <= 0 {
		return 0
	}
	res.WarmupRate = float64(ws.sent) / secs
	fmt.Fprintf(progress, "%s warm-up: %d sent at %.0f msgs/s\n", cfg.system, ws.sent, res.WarmupRate)
	return time.Duration(1.5 * float64(cfg.n) / res.WarmupRate * float64(time.Second))
}

// send sends n messages in index order from cfg.senders goroutines,
// each bound to one producer client, and waits for every answer.
func send(ctx context.Context, cfg config, prods []rmq.Producer, topic string, p phase, nonce uint64, n int, dueOf func(int) int64) sendStats {
	ss := sendStats{ok: make([]bool, n), latencies: make([]int64, 0, n)}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	ss.start = time.Now()
	for s := range cfg.senders {
		pr := prods[s%len(prods)]
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				due := dueOf(i)
				msg := &rmq.Message{Topic: topic, Body: encodeBody(cfg.size, p, nonce, uint32(i), due)}
				msg.SetDelayTimestamp(time.UnixMilli(due))
				sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				t0 := time.Now()
				_, err := pr.Send(sctx, msg)
				t1 := time.Now()
				cancel()
				mu.Lock()
				if err != nil {
					if ss.errs == 0 {
						ss.firstErr = err.Error()
					}
					ss.errs++
				} else {
					ss.ok[i] = true
					ss.sent++
					ss.latencies = append(ss.latencies, t1.Sub(t0).Nanoseconds())
					if t1.UnixMilli() > due {
						ss.late++
					}
				}
				if t1.After(ss.end) {
					ss.end = t1
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ss
}

// dueTimes gives the due time (unix ms) of the i-th message and the last
// due time: the spread from start+lead (at least cfg.lead) at millisecond
// steps over cfg.spread, the herd at the next whole second after start+lead.
// It records the lead, and the herd's instant, in res.
func dueTimes(cfg config, p phase, start time.Time, lead time.Duration, res *phaseResult) (dueOf func(i int) int64, lastDue int64) {
	if p == phaseSpread {
		lead = max(lead, cfg.lead)
		base := start.Add(lead).UnixMilli()
		step := cfg.spread.Milliseconds()
		dueOf = func(i int) int64 { return base + int64(i)*step/int64(cfg.n) }
		lastDue = dueOf(cfg.n - 1)
		res.LeadSec = lead.Seconds()
	} else {
		instant := start.Add(lead).Truncate(time.Second).Add(time.Second)
		dueOf = func(int) int64 { return instant.UnixMilli() }
		lastDue = instant.UnixMilli()
		res.Instant = &instant
		res.LeadSec = instant.Sub(start).Seconds()
	}
	return dueOf, lastDue
}

// awaitCollected waits until the collector holds sent messages or the
// deadline passes, polling every 50 ms; it fails only when ctx ends.
func awaitCollected(ctx context.Context, col *collector, sent int, deadline time.Time) error {
	for col.count() < sent && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// profileDrain starts the -cpuprofile of the herd's drain at its instant
// (waiting for it) and returns what stops it; a no-op without the flag or
// outside the herd. A profile that cannot start is reported, not fatal.
func profileDrain(cfg config, p phase, instant *time.Time, progress io.Writer) (stop func()) {
	if cfg.cpuprofile == "" || p != phaseHerd || instant == nil {
		return func() {}
	}
	time.Sleep(time.Until(*instant))
	f, err := os.Create(cfg.cpuprofile)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(progress, "rmqbench: -cpuprofile:", err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
