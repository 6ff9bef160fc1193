//go:build !race

package remoting

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// startBench is startTest for a benchmark: an engine with fsync before
// every answer (the default) and the given level table.
func startBench(b *testing.B, levels []time.Duration) *testBroker {
	dir := b.TempDir()
	lim := message.Limits{DelayLevels: levels}
	eng, err := engine.Open(engine.Options{Dir: dir + "/engine", Limits: lim, DefaultQueues: 4,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(eng, Options{Limits: lim, DefaultQueues: 4, AutoCreateTopics: true, OffsetsDir: dir + "/remoting",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close(); eng.Close() })
	return &testBroker{eng: eng, srv: srv, addr: ln.Addr().String(), dir: dir}
}

type benchProducer struct{ p rocketmq.Producer }

func newBenchProducer(b *testing.B, tb *testBroker) *benchProducer {
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{tb.addr})),
		producer.WithInstanceName(fmt.Sprintf("bench-%d-%d", os.Getpid(), instances.Add(1))))
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	return &benchProducer{p}
}

func newBenchPush(b *testing.B, tb *testBroker, got chan delivery) rocketmq.PushConsumer {
	c, err := rocketmq.NewPushConsumer(consumer.WithGroupName("bench"),
		consumer.WithInstance(fmt.Sprintf("bench-%d-%d", os.Getpid(), instances.Add(1))),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{tb.addr})))
	if err != nil {
		b.Fatal(err)
	}
	err = c.Subscribe("late", consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now()
		for _, m := range msgs {
			got <- delivery{m, now}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	return c
}
