package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// The benchmarks run the same operations on the engine in-process and
// through the HTTP API (httptest on loopback, JSON both ways), on a real
// data directory with the default sync flush, so the ratio of the two is
// the API's cost:
//
//	go test ./server -run XXX -bench 'SendBatch|ReceiveAck' -benchtime 20000x
//	go test ./server -run XXX -bench ConsumerLateness -benchtime 1x
//
// (b.N counts messages in the first two; the lateness benchmark runs its
// fixed scenario b.N times, so give it -benchtime 1x.) Message bodies are
// 256 bytes.

// backend is one way to reach the broker.
type backend interface {
	sendBatch(ctx context.Context, topic string, n int, delay func(i int) time.Duration) error
	// receive leases up to max messages and returns their receipts and due times.
	receive(ctx context.Context, topic string, max int, wait time.Duration) (receipts []string, due []int64, err error)
	ack(ctx context.Context, topic string, receipts []string) error
	// receiveAck acks the receipts of the previous batch (if any), then
	// receives as receive does.
	receiveAck(ctx context.Context, topic string, max int, wait time.Duration, ack []string) (receipts []string, err error)
}

// receiveAfterAck is receiveAck as two calls, an ack then a receive: the
// engine's way, and the HTTP API's before a receive could carry acks.
func receiveAfterAck(ctx context.Context, be backend, topic string, max int, wait time.Duration, ack []string) ([]string, error) {
	if len(ack) > 0 {
		if err := be.ack(ctx, topic, ack); err != nil {
			return nil, err
		}
	}
	rs, _, err := be.receive(ctx, topic, max, wait)
	return rs, err
}

var body256 = strings.Repeat("b", 256)

type engineBackend struct{ eng *engine.Engine }

func (e engineBackend) sendBatch(ctx context.Context, topic string, n int, delay func(int) time.Duration) error {
	reqs := make([]engine.SendRequest, n)
	for i := range reqs {
		reqs[i] = engine.SendRequest{Message: message.Message{Topic: topic, Body: []byte(body256)}, When: message.When{Delay: delay(i)}}
	}
	_, err := e.eng.SendBatch(ctx, reqs)
	return err
}

func (e engineBackend) receive(ctx context.Context, topic string, max int, wait time.Duration) ([]string, []int64, error) {
	got, err := e.eng.Receive(ctx, engine.ReceiveRequest{Topic: topic, Group: "bench", Max: max, Wait: wait})
	rs, due := make([]string, len(got)), make([]int64, len(got))
	for i, m := range got {
		rs[i], due[i] = m.Receipt, int64(m.Due)
	}
	return rs, due, err
}

func (e engineBackend) ack(ctx context.Context, topic string, receipts []string) error {
	return e.eng.Ack(ctx, topic, "bench", receipts...)
}

func (e engineBackend) receiveAck(ctx context.Context, topic string, max int, wait time.Duration, ack []string) ([]string, error) {
	return receiveAfterAck(ctx, e, topic, max, wait, ack)
}

type httpBackend struct {
	base   string
	client *http.Client
}

func (h httpBackend) post(ctx context.Context, path string, in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", h.base+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

func (h httpBackend) sendBatch(ctx context.Context, topic string, n int, delay func(int) time.Duration) error {
	msgs := make([]api.SendMessage, n)
	for i := range msgs {
		b := body256
		msgs[i] = api.SendMessage{Body: &b}
		if d := delay(i); d > 0 {
			msgs[i].Delay = d.String()
		}
	}
	var out api.BatchReceipts
	return h.post(ctx, "/v1/topics/"+topic+"/batch", api.BatchRequest{Messages: msgs}, &out)
}

func (h httpBackend) receive(ctx context.Context, topic string, max int, wait time.Duration) ([]string, []int64, error) {
	var out api.ReceiveResponse
	in := api.ReceiveRequest{Max: max}
	if wait > 0 {
		in.Wait = wait.String()
	}
	if err := h.post(ctx, "/v1/topics/"+topic+"/groups/bench/receive", in, &out); err != nil {
		return nil, nil, err
	}
	rs, due := make([]string, len(out.Messages)), make([]int64, len(out.Messages))
	for i, m := range out.Messages {
		rs[i], due[i] = m.Receipt, int64(m.Due)
	}
	return rs, due, nil
}

func (h httpBackend) ack(ctx context.Context, topic string, receipts []string) error {
	var out api.AckResponse
	return h.post(ctx, "/v1/topics/"+topic+"/groups/bench/ack", api.AckRequest{Receipts: receipts}, &out)
}

func (h httpBackend) receiveAck(ctx context.Context, topic string, max int, wait time.Duration, ack []string) ([]string, error) {
	return receiveAfterAck(ctx, h, topic, max, wait, ack)
}

// engineCarryBackend is the engine in-process with the acks of the
// previous batch carried by the next receive (ReceiveRequest.Ack): one
// call and one append per batch, the engine's own best path.
type engineCarryBackend struct{ engineBackend }

func (e engineCarryBackend) receiveAck(ctx context.Context, topic string, max int, wait time.Duration, ack []string) ([]string, error) {
	got, err := e.eng.Receive(ctx, engine.ReceiveRequest{Topic: topic, Group: "bench", Max: max, Wait: wait, Ack: ack})
	rs := make([]string, len(got))
	for i, m := range got {
		rs[i] = m.Receipt
	}
	return rs, err
}

// clientBackend is the HTTP API through package client, as consumers
// reach it: a receive carries the acks of the previous batch and asks for
// text bodies.
type clientBackend struct {
	httpBackend
	c *client.Client
}

func (cb clientBackend) receiveAck(ctx context.Context, topic string, max int, wait time.Duration, ack []string) ([]string, error) {
	got, err := cb.c.Receive(ctx, topic, "bench", client.ReceiveOptions{Max: max, Wait: wait, Ack: ack, BodyEncoding: client.BodyText})
	rs := make([]string, len(got))
	for i, m := range got {
		rs[i] = m.Receipt
	}
	return rs, err
}

// benchBackends opens an engine on a real directory and yields it both
// in-process ("engine") and behind the HTTP API ("http": JSON by
// encoding/json, one request per operation); more kinds may be named
// ("client": see clientBackend).
func benchBackends(b *testing.B, run func(b *testing.B, be backend, eng *engine.Engine), more ...string) {
	for _, kind := range append([]string{"engine", "http"}, more...) {
		b.Run(kind, func(b *testing.B) {
			cfg, logger, eng := benchEngine(b)
			var be backend = engineBackend{eng}
			if kind == "engine-carry" {
				be = engineCarryBackend{engineBackend{eng}}
			} else if kind != "engine" {
				srv := httptest.NewServer(New(eng, cfg, logger, nil))
				defer srv.Close()
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				defer hc.CloseIdleConnections()
				be = httpBackend{base: srv.URL, client: hc}
				if kind == "client" {
					be = clientBackend{httpBackend{base: srv.URL, client: hc}, client.New(srv.URL, client.WithRetries(0))}
				}
			}
			run(b, be, eng)
		})
	}
}

// benchEngine opens an engine with the server's defaults on a real
// directory, closed when b ends.
func benchEngine(b *testing.B) (Options, *slog.Logger, *engine.Engine) {
	cfg := DefaultOptions()
	cfg.DataDir = b.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(serveEngineOptions(cfg.DataDir, logger))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	return cfg, logger, eng
}

func noDelay(int) time.Duration { return 0 }

// BenchmarkSendBatch100: 8 producers send batches of 100 messages; b.N
// counts messages.
func BenchmarkSendBatch100(b *testing.B) {
	benchBackends(b, func(b *testing.B, be backend, _ *engine.Engine) {
		ctx := context.Background()
		var left atomic.Int64
		left.Store(int64(b.N))
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for p := 0; p < 8; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					n := min(left.Add(-100)+100, 100)
					if n <= 0 {
						return
					}
					if err := be.sendBatch(ctx, "bench", int(n), noDelay); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	})
}

// prefill sends n messages due now and waits until they are visible.
func prefill(b *testing.B, eng *engine.Engine, n int) {
	ctx := context.Background()
	be := engineBackend{eng}
	for left := n; left > 0; left -= 1000 {
		if err := be.sendBatch(ctx, "bench", min(left, 1000), noDelay); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ts, err := eng.DescribeTopic("bench")
		if err != nil {
			b.Fatal(err)
		}
		if ts.Visible >= uint64(n) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d visible after a minute", ts.Visible, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkReceiveAck8: 8 consumers receive (up to 32 at a time) and ack
// b.N visible messages; each acks a batch as it asks for the next. The
// engine and "http" make that two calls (ack, then receive); "client"
// makes it one request, a receive that carries the acks, and
// "engine-carry" one engine call that does the same.
func BenchmarkReceiveAck8(b *testing.B) {
	benchBackends(b, func(b *testing.B, be backend, eng *engine.Engine) {
		prefill(b, eng, b.N)
		ctx := context.Background()
		var received atomic.Int64
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for c := 0; c < 8; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var pending []string
				for received.Load() < int64(b.N) {
					rs, err := be.receiveAck(ctx, "bench", 32, 50*time.Millisecond, pending)
					if err != nil {
						b.Error(err)
						return
					}
					received.Add(int64(len(rs)))
					pending = rs
				}
				if len(pending) > 0 {
					if err := be.ack(ctx, "bench", pending); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		if g, err := eng.Groups("bench"); err != nil || len(g) != 1 || g[0].Acked != uint64(b.N) {
			b.Fatalf("acked %+v (%v), want %d", g, err, b.N)
		}
	}, "client", "engine-carry")
}

// BenchmarkConsumerLateness: 5,000 messages due over 2.5 s (one every
// 0.5 ms, the first 500 ms after the send) reach 8 long-polling consumers;
// it reports the lateness each consumer saw (its clock when the receive
// answered minus the due time) as p50, p99 and max in ms. Use -benchtime 1x.
func BenchmarkConsumerLateness(b *testing.B) {
	const n = 5000
	benchBackends(b, func(b *testing.B, be backend, eng *engine.Engine) {
		ctx := context.Background()
		for i := 0; i < b.N; i++ {
			topic := fmt.Sprint("late", i)
			for k := 0; k < n; k += 1000 {
				base := k
				if err := be.sendBatch(ctx, topic, 1000, func(j int) time.Duration {
					return 500*time.Millisecond + time.Duration(base+j)*500*time.Microsecond
				}); err != nil {
					b.Fatal(err)
				}
			}
			var mu sync.Mutex
			var late []int64
			var wg sync.WaitGroup
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			for c := 0; c < 8; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						mu.Lock()
						finished := len(late) >= n
						mu.Unlock()
						if finished || cctx.Err() != nil {
							return
						}
						rs, due, err := be.receive(cctx, topic, 32, time.Second)
						at := time.Now().UnixMilli()
						if err != nil {
							return
						}
						mu.Lock()
						for _, d := range due {
							late = append(late, at-d)
						}
						mu.Unlock()
						if len(rs) > 0 {
							if err := be.ack(cctx, topic, rs); err != nil {
								b.Error(err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			cancel()
			if len(late) != n {
				b.Fatalf("received %d of %d", len(late), n)
			}
			sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
			if late[0] < 0 {
				b.Fatalf("a message arrived %d ms early", -late[0])
			}
			b.ReportMetric(float64(late[n/2]), "p50-ms")
			b.ReportMetric(float64(late[n*99/100]), "p99-ms")
			b.ReportMetric(float64(late[n-1]), "max-ms")
		}
	})
}
