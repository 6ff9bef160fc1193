package rocketmq

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// Options configures the adapter. They restate the engine settings the
// protocol must announce (limits, queue counts), so that what the clients
// are told is what the engine enforces.
type Options struct {
	// Limits are the engine's message limits, with defaults applied.
	Limits message.Limits
	// DefaultQueues is the queue count advertised for a topic that does
	// not exist yet (it is created with this count on first send).
	DefaultQueues int
	// AutoCreateTopics says whether a send may create its topic; when
	// false, a route query for an unknown topic answers TOPIC_NOT_FOUND.
	AutoCreateTopics bool
	// MaxLongPoll bounds how long a receive waits for a message, and is
	// the long-polling timeout announced to consumers that ask for more;
	// 0 means DefaultLongPoll. At most engine.MaxReceiveWait.
	MaxLongPoll time.Duration
	// MaxBatch is the most messages one batch send may carry: the
	// engine's MaxBatch (the composition root passes it); 0 means
	// engine.DefaultMaxBatch.
	MaxBatch int
	// Access holds the principals calls are signed as and their rules
	// (package access); nil means the store of AccessSecret alone.
	Access *access.Store
	// Audit records recalls and every refusal; nil records nothing.
	Audit *access.Audit
	// AccessSecret, when not empty and Access is nil, is the secret every
	// call must be signed with (any access key, this secret: the
	// -auth-token principal); both empty accept any call (auth.go).
	AccessSecret string
	// SignatureSkew is how far a signed call's x-mq-date-time may be from
	// the broker's clock, either way; it is also how long a captured
	// signature can be replayed (auth.go). 0 means DefaultSignatureSkew;
	// at most MaxSignatureSkew.
	SignatureSkew time.Duration
	// AutoRenewLease is the lease of a message received with auto_renew
	// (push consumers), renewed every third of itself until the client
	// acks it, changes its invisibility itself, or goes away; 0 means
	// DefaultAutoRenewLease.
	AutoRenewLease time.Duration
	// AutoRenewMax bounds how long one message is renewed; 0 means
	// DefaultAutoRenewMax.
	AutoRenewMax time.Duration
	// MaxRequestBytes bounds a request's size, as -max-request-bytes
	// bounds an HTTP request's body; the bound is never below one message
	// of the largest size and its headers. 0 means that bound alone.
	MaxRequestBytes int
	// EarlyAcks answers AckMessage once the acked leases have ended,
	// with the ack's record written behind the answer (engine.AckBehind),
	// rather than after the record's fdatasync, the default. The official
	// clients ack one message a call, so with the default a consumer acks
	// at most as many messages per group commit as it has acks in flight.
	// A crash before the record is durable delivers those messages again
	// (at least once, as RocketMQ's own asynchronously flushed consumer
	// progress does); it never loses one. Flag -grpc-early-acks.
	EarlyAcks bool
	// Logger receives the adapter's logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultLongPoll is the default of Options.MaxLongPoll.
const DefaultLongPoll = 20 * time.Second

// receiveMargin is kept between the end of a long poll and the call's
// deadline, so that the empty answer reaches the client before it gives up.
const receiveMargin = 500 * time.Millisecond

// Server implements pb.MessagingServiceServer over an engine.
type Server struct {
	pb.UnimplementedMessagingServiceServer

	eng    *engine.Engine
	opts   Options
	access *access.Store
	audit  *access.Audit
	log    *slog.Logger
	met    *Collector
	// renew keeps the leases of auto_renew receives alive (renew.go).
	renew *renewer

	// done is closed by Close: telemetry streams and long polls end.
	done      chan struct{}
	closeOnce sync.Once

	mu sync.Mutex
	// longPoll holds each consumer's long-polling timeout from its
	// settings, by client ID; removed on NotifyClientTermination and when
	// its last telemetry stream ends.
	longPollOf map[string]time.Duration
	// streams counts each client ID's open telemetry streams: a client
	// that reconnects opens its new stream before the old one ends, and
	// its state goes only with the last.
	streams map[string]int
}

// New returns the adapter over eng.
func New(eng *engine.Engine, opts Options) *Server {
	opts.Limits = opts.Limits.Defaults()
	if opts.DefaultQueues < 1 {
		opts.DefaultQueues = 1
	}
	if opts.MaxLongPoll <= 0 {
		opts.MaxLongPoll = DefaultLongPoll
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = engine.DefaultMaxBatch
	}
	opts.MaxLongPoll = min(opts.MaxLongPoll, engine.MaxReceiveWait)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.AutoRenewLease <= 0 {
		opts.AutoRenewLease = DefaultAutoRenewLease
	}
	opts.AutoRenewLease = min(opts.AutoRenewLease, engine.MaxInvisible)
	if opts.AutoRenewMax <= 0 {
		opts.AutoRenewMax = DefaultAutoRenewMax
	}
	if opts.SignatureSkew <= 0 {
		opts.SignatureSkew = DefaultSignatureSkew
	}
	opts.SignatureSkew = min(opts.SignatureSkew, MaxSignatureSkew)
	s := &Server{eng: eng, opts: opts, log: opts.Logger, met: NewCollector(),
		renew: newRenewer(eng, opts.AutoRenewLease, opts.AutoRenewMax),
		done:  make(chan struct{}), longPollOf: map[string]time.Duration{}, streams: map[string]int{},
		access: opts.Access, audit: opts.Audit}
	if s.access == nil {
		// A token alone cannot make Open fail: no file is read.
		s.access, _ = access.Open(access.Options{AuthToken: opts.AccessSecret, Logger: opts.Logger})
	}
	go s.renew.run(s.done)
	return s
}

// Collector returns the per-RPC metrics of s, for a Prometheus registry.
func (s *Server) Collector() *Collector { return s.met }

// Close ends every telemetry stream and long poll at once, and the lease
// renewals; call it before grpc.Server.GracefulStop, which would otherwise
// wait for them.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.done) }) }

// GRPCServer returns a gRPC server with s registered, its messages bounded
// by MaxRequestBytes (and never below one message of the largest size
// plus room for headers), and the metrics interceptors. The bound was one
// message alone, so a batch of 200 messages of 30 KB, well within the
// limits an HTTP batch has, was refused.
func (s *Server) GRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	opts := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(max(s.opts.MaxRequestBytes, s.opts.Limits.MaxBodyBytes+s.opts.Limits.MaxHeaderBytes+64<<10)),
		grpc.MaxConcurrentStreams(1024),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(s.met.unary, s.authUnary),
		grpc.ChainStreamInterceptor(s.met.stream, s.authStream),
	}, extra...)
	g := grpc.NewServer(opts...)
	pb.RegisterMessagingServiceServer(g, s)
	return g
}

// clientID returns the x-mq-client-id header of a call ("" if absent).
func clientID(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-mq-client-id"); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// ok is the OK status.
func ok() *pb.Status { return &pb.Status{Code: pb.Code_OK, Message: "OK"} }

func status(code pb.Code, msg string) *pb.Status { return &pb.Status{Code: code, Message: msg} }

// errStatus maps an engine error onto the closest RocketMQ status code;
// notFound is the code of errs.NotFound in the caller's context.
func errStatus(err error, notFound pb.Code) *pb.Status {
	code := pb.Code_INTERNAL_ERROR
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = pb.Code_REQUEST_TIMEOUT
	default:
		switch errs.CodeOf(err) {
		case errs.InvalidArgument:
			code = pb.Code_BAD_REQUEST
		case errs.NotFound:
			code = notFound
		case errs.AlreadyExists, errs.FailedPrecondition:
			code = pb.Code_PRECONDITION_FAILED
		case errs.TooLarge:
			code = pb.Code_PAYLOAD_TOO_LARGE
		case errs.ResourceExhausted:
			code = pb.Code_TOO_MANY_REQUESTS
		case errs.Unavailable:
			code = pb.Code_INTERNAL_SERVER_ERROR
		case errs.Unauthenticated:
			code = pb.Code_UNAUTHORIZED
		}
	}
	return status(code, err.Error())
}

// unsupported is the status of a feature hourglass does not serve.
func unsupported(what string) *pb.Status {
	return status(pb.Code_NOT_IMPLEMENTED, what+" is not supported by hourglass")
}
