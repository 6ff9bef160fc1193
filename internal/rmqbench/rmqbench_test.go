package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/benchreport"
	"github.com/hourglass-mq/hourglass/broker"
)

func TestBodyRoundTrip(t *testing.T) {
	b := encodeBody(256, phaseHerd, 0xfeedface12345678, 19999, 1796000000123)
	if len(b) != 256 {
		t.Fatalf("len %d, want 256", len(b))
	}
	p, nonce, idx, due, ok := decodeBody(b)
	if !ok || p != phaseHerd || nonce != 0xfeedface12345678 || idx != 19999 || due != 1796000000123 {
		t.Fatalf("decoded %c %x %d %d %v", p, nonce, idx, due, ok)
	}
	for _, bad := range [][]byte{nil, b[:headerSize-1], append([]byte("xmqbench"), b[8:]...)} {
		if _, _, _, _, ok := decodeBody(bad); ok {
			t.Errorf("decodeBody(%q...) accepted a body that is not ours", bad[:min(len(bad), 8)])
		}
	}
}

func TestCollectorSortsArrivals(t *testing.T) {
	c := newCollector(phaseSpread, 7, 3)
	now := time.UnixMilli(1000)
	c.add(encodeBody(64, phaseSpread, 7, 1, 900), now)
	c.add(encodeBody(64, phaseSpread, 7, 1, 900), now)  // duplicate
	c.add(encodeBody(64, phaseSpread, 8, 0, 900), now)  // another run
	c.add(encodeBody(64, phaseHerd, 7, 0, 900), now)    // another phase
	c.add(encodeBody(64, phaseSpread, 7, 3, 900), now)  // index out of range
	c.add(encodeBody(64, phaseWarmup, 7, 0, 900), now)  // warm-up
	c.add(encodeBody(64, phaseSpread, 7, 2, 1200), now) // early
	if c.received != 2 || c.dups != 1 || c.foreign != 3 || c.warmup != 1 {
		t.Fatalf("received %d dups %d foreign %d warmup %d, want 2 1 3 1", c.received, c.dups, c.foreign, c.warmup)
	}
	ss := sendStats{ok: []bool{true, true, true}, sent: 3, start: now, end: now.Add(time.Second)}
	var res phaseResult
	fill(&res, config{}, ss, c, &receivers{})
	if res.Lost != 1 || res.Early != 1 || res.Received != 2 || res.SendRate != 3 {
		t.Fatalf("lost %d early %d received %d rate %v, want 1 1 2 3", res.Lost, res.Early, res.Received, res.SendRate)
	}
	if res.Lateness.Max != 100 || res.Lateness.Min != -200 {
		t.Fatalf("lateness min %v max %v, want -200 and 100 ms", res.Lateness.Min, res.Lateness.Max)
	}
}

func TestValidate(t *testing.T) {
	ok := defaults()
	ok.endpoint, ok.spreadTopic = "127.0.0.1:8081", "t"
	if err := ok.validate(); err != nil {
		t.Fatalf("defaults with an endpoint and a topic: %v", err)
	}
	for name, edit := range map[string]func(*config){
		"no endpoint": func(c *config) { c.endpoint = "" },
		"no topic":    func(c *config) { c.spreadTopic = "" },
		"n zero":      func(c *config) { c.n = 0 },
		"small body":  func(c *config) { c.size = headerSize - 1 },
		"no senders":  func(c *config) { c.senders = 0 },
		"zero grace":  func(c *config) { c.grace = 0 },
		"neg warmup":  func(c *config) { c.warmup = -1 },
	} {
		c := ok
		edit(&c)
		if c.validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if code := realMain(context.Background(), []string{"-n", "x"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("a bad flag exits %d, want 2", code)
	}
}

func TestSummarize(t *testing.T) {
	mk := func(system, flush string, run int, p99, last, rate float64) report {
		return report{System: system, Flush: flush, Run: run,
			Spread: &phaseResult{Lateness: benchreport.Lateness{P99: p99}, SendRate: rate},
			Herd:   &phaseResult{HerdLastMs: last, SendRate: rate}}
	}
	reps := []report{
		mk("rocketmq", "async", 1, 1200, 6000, 1000), mk("hourglass", "sync", 1, 4, 100, 3000),
		mk("rocketmq", "async", 2, 1100, 3000, 1100), mk("hourglass", "sync", 2, 8, 150, 4000),
		mk("rocketmq", "async", 3, 1300, 4000, 900), mk("hourglass", "sync", 3, 6, 300, 2000),
	}
	var buf bytes.Buffer
	summarize(reps, &buf)
	out := buf.String()
	for _, want := range []string{
		"| metric | hourglass (sync flush): median [range] | rocketmq (async flush): median [range] | hourglass / rocketmq |",
		"| spread: lateness p99 (ms) | 6 [4 – 8] (3 runs) | 1,200 [1,100 – 1,300] (3 runs) | 0.005 |",
		"| herd: last arrival after the instant (ms) | 150 [100 – 300] (3 runs) | 4,000 [3,000 – 6,000] (3 runs) | 0.0375 |",
		"| spread: send rate (msgs/s) | 3,000 [2,000 – 4,000] (3 runs) | 1,000 [900 – 1,100] (3 runs) | 3 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "| spread: lateness from the broker's store time p99 (ms) | – | – | – |") {
		t.Errorf("reports without store times got figures of them:\n%s", out)
	}
	for i := range reps {
		reps[i].Spread.LatenessFromStore = &benchreport.Lateness{Count: 10, P99: float64(i + 1)}
		reps[i].Spread.EarlyFromStore = i % 2
	}
	buf.Reset()
	summarize(reps, &buf)
	out = buf.String()
	for _, want := range []string{
		// sorted by run: rocketmq's are 1, 3, 5 (i = 0, 2, 4); hourglass's 2, 4, 6.
		"| spread: lateness from the broker's store time p99 (ms) | 4 [2 – 6] (3 runs) | 3 [1 – 5] (3 runs) | 1.33 |",
		"| spread: early from the broker's store time | 1 [1 – 1] (3 runs) | 0 [0 – 0] (3 runs) | – |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "| paced: lateness p99 (ms) | – | – | – |") {
		t.Errorf("reports without a paced phase got figures of it:\n%s", out)
	}
	for i := range reps {
		reps[i].PacedRate = 1000
		reps[i].Paced = &phaseResult{Lateness: benchreport.Lateness{P99: float64(10 * (i + 1))}}
	}
	buf.Reset()
	summarize(reps, &buf)
	if out = buf.String(); !strings.Contains(out, "| paced: lateness p99 (ms) | 40 [20 – 60] (3 runs) | 30 [10 – 50] (3 runs) | 1.33 |") {
		t.Errorf("the paced phase's p99 is not its own:\n%s", out)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", m)
	}
}

// logRecords receives the JSON log records of a server, one per Write
// (slog's JSON handler writes each record whole); records beyond its
// buffer are dropped, as only the first few are looked at.
type logRecords chan []byte

func (r logRecords) Write(p []byte) (int, error) {
	select {
	case r <- bytes.Clone(p):
	default:
	}
	return len(p), nil
}

// grpcAddr finds the address in the record Run writes when its gRPC
// service listens, among the records written so far.
func (r logRecords) grpcAddr() string {
	for {
		select {
		case line := <-r:
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(line, &rec) == nil && rec.Msg == broker.GRPCListeningMsg {
				return rec.Addr
			}
		default:
			return ""
		}
	}
}

// quietOnce quiets the official client once per test process. Its logger
// is a package variable that ResetLogger replaces without a lock, and the
// heartbeat goroutines of the clients an earlier run of the test started
// (-count) go on reading it: a second reset was a data race.
var quietOnce sync.Once

// TestRunAgainstHourglass runs both phases, small, against a real
// hourglass server in the process: every message arrives, none early, and
// the report holds the figures the summary reads, the broker side too.
func TestRunAgainstHourglass(t *testing.T) {
	t.Setenv("rocketmq.client.logRoot", t.TempDir())
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.GRPCListen, cfg.GRPCPlaintext = "127.0.0.1:0", "127.0.0.1:0", true
	cfg.DrainTimeout = time.Second
	logs := make(logRecords, 64)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- broker.Run(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)), func(a string) { ready <- a })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop in 10s")
		}
	})
	var httpAddr string
	select {
	case httpAddr = <-ready:
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start in 10s")
	}

	bc := defaults()
	bc.endpoint, bc.system, bc.tls = logs.grpcAddr(), "hourglass", false
	bc.spreadTopic, bc.herdTopic = "bench-spread", "bench-herd"
	bc.n, bc.warmup, bc.spread, bc.lead, bc.grace = 300, 50, time.Second, time.Second, 20*time.Second
	bc.await = time.Second
	bc.producers, bc.senders, bc.receivers = 2, 8, 4
	bc.metrics = "http://" + httpAddr + "/metrics"
	quietOnce.Do(func() { quietClient(bc.tls) })
	rep, err := run(ctx, bc, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string]*phaseResult{"spread": rep.Spread, "herd": rep.Herd} {
		if x == nil {
			t.Fatalf("%s: no result", name)
		}
		if x.Sent != bc.n || x.Received != bc.n || x.Lost != 0 || x.Early != 0 || x.Foreign != 0 || x.SendErrors != 0 {
			t.Errorf("%s: sent %d received %d lost %d early %d foreign %d send errors %d (%s)",
				name, x.Sent, x.Received, x.Lost, x.Early, x.Foreign, x.SendErrors, x.FirstSendError)
		}
		if x.SendRate <= 0 || x.Lateness.Count != bc.n {
			t.Errorf("%s: send rate %v, lateness count %d", name, x.SendRate, x.Lateness.Count)
		}
		// The broker made each visible once; the spread's count may hold a
		// warm-up message that fired late on a loaded machine.
		if x.Broker == nil || x.Broker.Count < bc.n || x.Broker.Count > bc.n+bc.warmup || x.Broker.MaxLeMs < 0 {
			t.Errorf("%s: broker side %+v, want %d messages", name, x.Broker, bc.n)
		}
	}
	if rep.Spread.WarmupSent != bc.warmup || rep.Spread.WarmupRate <= 0 {
		t.Errorf("warm-up sent %d at %v msgs/s", rep.Spread.WarmupSent, rep.Spread.WarmupRate)
	}
	if rep.Herd.Instant == nil || rep.Herd.HerdLastMs < rep.Herd.HerdFirstMs || rep.Herd.HerdFirstMs < 0 {
		t.Errorf("herd: instant %v, first %v ms, last %v ms", rep.Herd.Instant, rep.Herd.HerdFirstMs, rep.Herd.HerdLastMs)
	}
}

func TestBrokerSideLateness(t *testing.T) {
	page := func(counts ...int) string {
		bounds := []string{"0.001", "0.01", "0.1", "1", "+Inf"}
		var b strings.Builder
		b.WriteString("# TYPE hourglass_lateness_seconds histogram\n")
		for i, le := range bounds {
			fmt.Fprintf(&b, "%s%s\"} %d\n", latenessBucket, le, counts[i])
		}
		b.WriteString("hourglass_lateness_seconds_count 0\n")
		return b.String()
	}
	before, err := parseBuckets(strings.NewReader(page(5, 5, 5, 5, 5)))
	if err != nil {
		t.Fatal(err)
	}
	// 100 more: 60 within 1 ms, 39 more within 10 ms, the last within 1 s.
	after, err := parseBuckets(strings.NewReader(page(65, 104, 104, 105, 105)))
	if err != nil {
		t.Fatal(err)
	}
	got := since(before, after)
	if want := (brokerLateness{Count: 100, P50LeMs: 1, P99LeMs: 10, MaxLeMs: 1000}); got != want {
		t.Fatalf("since = %+v, want %+v", got, want)
	}
	if _, err := parseBuckets(strings.NewReader("other_metric 1\n")); err == nil {
		t.Error("a page without the histogram was accepted")
	}
	if _, err := parseBuckets(strings.NewReader(latenessBucket + `x"} 1` + "\n")); err == nil {
		t.Error("a bad bound was accepted")
	}
}
