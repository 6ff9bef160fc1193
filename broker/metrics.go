package broker

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/metrics"
)

// metricsHandler serves the engine's metrics, the runtime's, the process's
// and, when the gRPC service runs, its per-RPC metrics.
func metricsHandler(eng *engine.Engine, g *grpcService) http.Handler {
	if g == nil {
		return metrics.Handler(eng)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(eng), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), g.adapter.Collector())
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
