package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/hourglass-mq/hourglass/broker"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
)

// lab is the in-process engine and the broker on loopback, side by side.
type lab struct {
	c       config
	eng     *engine.Engine
	api     *client.Client
	httpURL string // the broker's HTTP API, http://host:port
	grpc    string // the broker's gRPC address
	stop    func() error
	profile *os.File // the CPU profile still to take, if any
	body    []byte
	topicN  int // numbers the topics, one fresh topic per side
}

// addrCatcher keeps the gRPC address broker.Run logs.
type addrCatcher struct {
	slog.Handler
	mu   sync.Mutex
	addr string
}

func (h *addrCatcher) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == broker.GRPCListeningMsg {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "addr" {
				h.mu.Lock()
				h.addr = a.Value.String()
				h.mu.Unlock()
			}
			return true
		})
	}
	return nil
}

func (h *addrCatcher) Enabled(context.Context, slog.Level) bool { return true }

// openLab opens the engine on dir/engine and starts the broker on
// dir/broker, both with the server's default options.
func openLab(c config, dir string, quiet *slog.Logger) (*lab, error) {
	l := &lab{c: c, body: make([]byte, c.body)}
	for i := range l.body {
		l.body[i] = byte('a' + i%26)
	}
	ecfg := broker.DefaultConfig()
	ecfg.DataDir = filepath.Join(dir, "engine")
	eng, err := engine.Open(ecfg.EngineOptions(quiet))
	if err != nil {
		return nil, err
	}
	l.eng = eng

	cfg := broker.DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "broker")
	cfg.Listen = "127.0.0.1:0"
	cfg.GRPCListen = "127.0.0.1:0"
	cfg.GRPCPlaintext = !c.grpcTLS
	cfg.GRPCEarlyAcks = c.earlyAcks
	cfg.DrainTimeout = time.Second
	cfg.LogLevel = "warn"
	h := &addrCatcher{Handler: quiet.Handler()}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- broker.Run(ctx, cfg, slog.New(h), func(a string) { ready <- a }) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		eng.Close()
		return nil, fmt.Errorf("the broker did not start: %w", err)
	}
	l.stop = func() error { cancel(); return <-done }
	h.mu.Lock()
	l.grpc = h.addr
	h.mu.Unlock()
	if l.grpc == "" {
		l.close()
		return nil, fmt.Errorf("the broker's gRPC service did not report its address")
	}
	l.httpURL = "http://" + addr
	l.api = client.New(l.httpURL, client.WithRetries(0))
	os.Setenv("mq.consoleAppender.enabled", "true")
	os.Setenv("rocketmq.client.logLevel", "error")
	rmq.ResetLogger()
	rmq.EnableSsl = c.grpcTLS
	return l, nil
}

func (l *lab) close() {
	if l.stop != nil {
		if err := l.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "netbench: broker:", err)
		}
	}
	l.eng.Close()
}

// topic creates a fresh topic on both sides and returns its name.
func (l *lab) topic(prefix string) (string, error) {
	l.topicN++
	name := fmt.Sprintf("%s-%d", prefix, l.topicN)
	if err := l.eng.CreateTopic(name, engine.TopicConfig{}); err != nil {
		return "", err
	}
	ctx, cancel := withTimeout(10 * time.Second)
	defer cancel()
	_, err := l.api.CreateTopic(ctx, name, client.TopicConfig{})
	return name, err
}

// sides returns the in-process and the network side of a pair.
func (l *lab) sides(name string) (base, netw func() (float64, error)) {
	c := l.c
	switch name {
	case "send":
		return func() (float64, error) { return l.engineSend(c.producers, 1) },
			func() (float64, error) { return l.httpSend(c.producers, 1) }
	case "sendstream":
		return func() (float64, error) { return l.engineSend(c.producers, 1) }, l.streamSend
	case "httpfloor":
		return func() (float64, error) { return l.httpFloor(false) },
			func() (float64, error) { return l.httpSend(c.producers, 1) }
	case "grpcfloor":
		return func() (float64, error) { return l.grpcFloor(c.rmqSenders, c.rmqProducers, false) }, l.rmqSend
	case "ackfloor":
		return func() (float64, error) { return l.grpcFloor(c.consumers, 1, true) }, l.rmqReceive
	case "h2cfloor":
		return func() (float64, error) { return l.httpFloor(true) },
			func() (float64, error) { return l.httpFloor(false) }
	case "batch":
		return func() (float64, error) { return l.engineSend(c.batchProducers, c.batch) },
			func() (float64, error) { return l.httpSend(c.batchProducers, c.batch) }
	case "rmqsend":
		return func() (float64, error) { return l.engineSend(c.rmqSenders, 1) },
			l.rmqSend
	case "recv":
		return l.engineReceive, l.httpReceive
	case "stream":
		return l.engineReceive, l.httpStream
	case "rmqrecv":
		return l.engineReceive, l.rmqReceive
	}
	panic("unknown pair " + name)
}

// during runs callers goroutines, each calling op in a loop until d has
// passed, and returns messages per second (op returns how many it sent).
func during(callers int, d time.Duration, op func(ctx context.Context) (int, error)) (float64, error) {
	var wg sync.WaitGroup
	counts := make([]int, callers)
	errs := make([]error, callers)
	ctx, cancel := withTimeout(d + time.Minute)
	defer cancel()
	start := time.Now()
	end := start.Add(d)
	for i := range callers {
		wg.Go(func() {
			for time.Now().Before(end) {
				n, err := op(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				counts[i] += n
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	total := 0
	for i := range counts {
		if errs[i] != nil {
			return 0, errs[i]
		}
		total += counts[i]
	}
	return float64(total) / took.Seconds(), nil
}
