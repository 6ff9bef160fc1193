package rocketmq

import (
	"context"
	"path"
	"sync"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	gstatus "google.golang.org/grpc/status"
)

// Collector counts the RocketMQ RPCs: calls by method and RocketMQ status
// code (gRPC's code for a call that failed below the protocol, e.g.
// "grpc:Unimplemented"), and their durations by method.
type Collector struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewCollector returns an empty collector.
func NewCollector() *Collector {
	return &Collector{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hourglass_rocketmq_requests_total",
			Help: "RocketMQ gRPC calls, by method and answered status code."}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hourglass_rocketmq_request_seconds",
			Help:    "Duration of RocketMQ gRPC calls (receives include their long poll), by method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5, 30}}, []string{"method"}),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.calls.Describe(ch)
	c.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.calls.Collect(ch)
	c.duration.Collect(ch)
}

func (c *Collector) observe(fullMethod string, code string, start time.Time) {
	m := path.Base(fullMethod)
	c.calls.WithLabelValues(m, code).Inc()
	c.duration.WithLabelValues(m).Observe(time.Since(start).Seconds())
}

// withStatus is every response of the protocol: each carries a Status.
type withStatus interface{ GetStatus() *pb.Status }

func (c *Collector) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	code := "grpc:" + gstatus.Code(err).String()
	if r, isResp := resp.(withStatus); err == nil && isResp {
		code = r.GetStatus().GetCode().String()
	}
	c.observe(info.FullMethod, code, start)
	return resp, err
}

func (c *Collector) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	w := &statusStream{ServerStream: ss}
	err := h(srv, w)
	code := "grpc:" + gstatus.Code(err).String()
	if last := w.status(); err == nil && last != nil {
		code = last.GetCode().String()
	}
	c.observe(info.FullMethod, code, start)
	return err
}

// statusStream keeps the last RocketMQ status a stream sent: a receive's
// answer.
// Guarded: Telemetry sends from a goroutine of its own, which may still
// be sending when the handler has returned and the interceptor reads it.
type statusStream struct {
	grpc.ServerStream
	mu   sync.Mutex
	last *pb.Status
}

func (s *statusStream) SendMsg(m any) error {
	if r, isResp := m.(withStatus); isResp && r.GetStatus() != nil {
		s.mu.Lock()
		s.last = r.GetStatus()
		s.mu.Unlock()
	}
	return s.ServerStream.SendMsg(m)
}

// status returns the last status sent.
func (s *statusStream) status() *pb.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}
