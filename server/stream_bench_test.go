package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/stream"
)

// BenchmarkReceiveAckStream8: 8 consumers receive and ack b.N visible
// messages through streams (batches of up to 32, a window of 64), each
// acking a batch as soon as it has it. "engine" is package stream
// in-process, shaped as the HTTP path is: per consumer, one goroutine
// leases (the broker's side), one takes the batches and hands their
// receipts on (the consumer), one acks (the broker's side); "client" is
// the same over HTTP (POST .../stream, client.Stream). Their ratio is
// the HTTP stream's cost; BenchmarkReceiveAck8 has the request/response
// consumers on the same load.
//
//	go test ./server -run XXX -bench ReceiveAckStream8 -benchtime 300000x
//
// HOURGLASS_BENCH_WINDOW=n sets the window (default: the stream's
// default); both report the commit log's fsyncs and their mean duration.
func BenchmarkReceiveAckStream8(b *testing.B) {
	for _, kind := range []string{"engine", "client"} {
		b.Run(kind, func(b *testing.B) {
			cfg, logger, eng := benchEngine(b)
			prefill(b, eng, b.N)
			opts := stream.Options{Topic: "bench", Group: "bench", Max: 32, Window: benchWindow()}
			var consume func(b *testing.B, received *atomic.Int64) error
			if kind == "engine" {
				consume = func(b *testing.B, received *atomic.Int64) error {
					return engineStreamConsumer(eng, opts, b.N, received)
				}
			} else {
				srv := httptest.NewServer(New(eng, cfg, logger, nil))
				defer srv.Close()
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				defer hc.CloseIdleConnections()
				c := client.New(srv.URL, client.WithHTTPClient(hc), client.WithRetries(0))
				consume = func(b *testing.B, received *atomic.Int64) error { return clientStreamConsumer(c, opts, b.N, received) }
			}
			var received atomic.Int64
			_, fs0, fsum0 := eng.Stats().FsyncSeconds.Snapshot()
			defer func() {
				_, fs1, fsum1 := eng.Stats().FsyncSeconds.Snapshot()
				b.ReportMetric(float64(fs1-fs0), "fsyncs")
				b.ReportMetric((fsum1-fsum0)/float64(fs1-fs0)*1e6, "us/fsync")
			}()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if err := consume(b, &received); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			if g, err := eng.Groups("bench"); err != nil || len(g) != 1 || g[0].Acked != uint64(b.N) {
				b.Fatalf("acked %+v (%v), want %d", g, err, b.N)
			}
		})
	}
}

// engineStreamConsumer is one in-process stream consumer until n messages
// have been received by all of them together and its acks are made.
func engineStreamConsumer(eng *engine.Engine, opts stream.Options, n int, received *atomic.Int64) error {
	st, err := stream.Open(eng, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	batches := make(chan []engine.Received, 4)
	acks := make(chan []string, 4)
	var wg sync.WaitGroup
	var ackErr error
	wg.Go(func() { // the broker's leasing side
		defer close(batches)
		for {
			got, err := st.Next(ctx)
			if err != nil {
				return
			}
			batches <- got
		}
	})
	wg.Go(func() { // the broker's acking side
		st.AckLines(context.Background(), acks, func(_ int, err error) bool {
			ackErr = err
			return err == nil
		})
	})
	go func() {
		whenAllDone(ctx.Done(), received, n)
		cancel()
	}()
	for got := range batches { // the consumer
		rs := make([]string, len(got))
		for i := range got {
			rs[i] = got[i].Receipt
		}
		acks <- rs
		received.Add(int64(len(got)))
	}
	close(acks)
	wg.Wait()
	return ackErr
}

// whenAllDone returns when the consumers together have all n messages,
// or when stop is closed.
func whenAllDone(stop <-chan struct{}, received *atomic.Int64, n int) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for received.Load() < int64(n) {
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// clientStreamConsumer is one HTTP stream consumer until n messages have
// been received by all of them together and its acks are confirmed.
func clientStreamConsumer(c *client.Client, opts stream.Options, n int, received *atomic.Int64) error {
	s, err := c.Stream(context.Background(), opts.Topic, opts.Group, client.StreamOptions{Max: opts.Max, Window: opts.Window, BodyEncoding: client.BodyText})
	if err != nil {
		return err
	}
	defer s.Close()
	// The consumers stop when all n are in, whoever took the last: a
	// watcher ends this stream's acks then, between two of its batches
	// (mu), so that every batch counted has its acks sent.
	var mu sync.Mutex
	done := make(chan struct{})
	defer close(done)
	go func() {
		whenAllDone(done, received, n)
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

// benchWindow is HOURGLASS_BENCH_WINDOW, or 0 (the default window).
func benchWindow() int {
	if v, err := strconv.Atoi(os.Getenv("HOURGLASS_BENCH_WINDOW")); err == nil {
		return v
	}
	return 0
}
