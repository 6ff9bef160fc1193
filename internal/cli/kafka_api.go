package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/kafkamode"
	"github.com/hourglass-mq/hourglass/kafkamode/kafkahttp"
	"github.com/hourglass-mq/hourglass/metrics"
)

// kafkaAPIHelp is the part of `hourglass kafka --help` about --listen.
const kafkaAPIHelp = `

With --listen the worker also serves the HTTP API there, so that the client
commands work against it with --server http://ADDR: send (a record with
_deliverAt and _bizTopic = --topic, partitioned by --key), inspect (by the
ID k:<partition>:<offset> that send prints, or --topic and --key for the
latest pending one), cancel and reschedule (control records in the
message's partition; a reschedule answers a new ID; cancel --every-key K
cancels every pending message with key K), and forecast (this worker's
partitions only). See the README, "Beyond one machine: Kafka mode".`

// serveKafkaAPI serves the Kafka-mode HTTP API of w on addr until the
// returned stop is called.
func serveKafkaAPI(a *App, w *kafkamode.Worker, addr, token string, log *slog.Logger) (stop func(), err error) {
	h, err := kafkahttp.New(w.Config(), w, kafkahttp.Options{AuthToken: token, Metrics: metrics.KafkaHandler(w), Logger: log})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("--listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(a.Stdout, "HTTP API on http://%s\n", ln.Addr())
	return func() { srv.Close(); h.Close() }, nil
}

// cancelEveryKey is `hourglass cancel --every-key K` against a Kafka-mode
// worker.
func (a *App) cancelEveryKey(ctx context.Context, c *command, cf *clientFlags, cl *client.Client, key string, t target, pos []string) int {
	if t.key != "" || t.topic != "" || len(pos) > 0 {
		return a.usageError(c, "--every-key goes alone: no message ID, --topic or --key")
	}
	r, err := cl.CancelKey(ctx, key)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(r)
		return ExitOK
	}
	if r.State == client.KafkaCancelled {
		fmt.Fprintf(a.Stdout, "cancelled every pending message with key %s, %d when the cancel was written (cancel record %s)\n", r.Key, r.Matched, r.Control)
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "cancel of every pending message with key %s requested (cancel record %s); the worker has not applied it yet\n", r.Key, r.Control)
	return ExitOK
}
