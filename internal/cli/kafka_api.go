package cli

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

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
message's partition; a reschedule answers a new ID), and forecast (this
worker's partitions only). Cancel every pending message with a key:
DELETE /v1/keys/{key}. See the README, "Beyond one machine: Kafka mode".`

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
