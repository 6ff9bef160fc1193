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
// and, for each protocol adapter that runs (RocketMQ gRPC, remoting), its
// per-request metrics.
func metricsHandler(eng *engine.Engine, g *grpcService, rm *remotingService) http.Handler {
	if g == nil && rm == nil {
		return metrics.Handler(eng)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(eng), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if g != nil {
		reg.MustRegister(g.adapter.Collector())
	}
	if rm != nil {
		reg.MustRegister(rm.adapter.Collector())
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
