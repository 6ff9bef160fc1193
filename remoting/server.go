package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// Options configures the adapter.
type Options struct {
	// Limits are the engine's message limits, with defaults applied; the
	// delay-level table is Limits.DelayLevels.
	Limits message.Limits
	// DefaultQueues is the queue count of a topic created on first send.
	DefaultQueues int
	// AutoCreateTopics says whether a send may create its topic; when
	// false, a route query for an unknown topic answers TOPIC_NOT_EXIST.
	AutoCreateTopics bool
	// MaxLongPoll bounds how long a pull waits for a message; 0 means
	// DefaultLongPoll.
	MaxLongPoll time.Duration
	// MaxBatch is the most messages one batch send may carry: the
	// engine's MaxBatch (the composition root passes it); 0 means
	// engine.DefaultMaxBatch.
	MaxBatch int
	// Access holds the principals requests are signed as (RocketMQ's
	// AclClientRPCHook: access key = principal) and their rules (package
	// access); nil means the store of AccessSecret alone.
	Access *access.Store
	// Audit records message-management requests and every refusal; nil
	// records nothing.
	Audit *access.Audit
	// AccessSecret, when not empty and Access is nil, is the secret every
	// request must be signed with (any access key, this secret key: the
	// -auth-token principal); both empty accept any request.
	AccessSecret string
	// OffsetsDir is where consumer offsets are kept (created if missing).
	OffsetsDir string
	// MaxFrame bounds one frame (header and body); it is never below one
	// message of the largest size with its headers and 64 KiB more, which
	// is what 0 means.
	MaxFrame int
	// ReadTimeout bounds how long one frame may take to arrive once its
	// first byte has; 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
	// IdleTimeout closes a connection that sends nothing for that long
	// (clients heartbeat every 30 s); 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxConns bounds the connections open at once: each holds a read
	// buffer and a goroutine even when idle, so many clients holding
	// connections would otherwise grow the broker's memory (and file
	// descriptors) without end. A connection past it is closed at once,
	// with a log line. 0 means DefaultMaxConns; negative, no bound.
	MaxConns int
	// TransactionTimeout is how long a half message may stay open before
	// its producer is asked for its state; 0 means 6 s, as RocketMQ.
	TransactionTimeout time.Duration
	// TransactionCheckInterval is how often open transactions are
	// checked; 0 means 30 s.
	TransactionCheckInterval time.Duration
	// Logger receives the adapter's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultLongPoll    = 15 * time.Second
	DefaultReadTimeout = 30 * time.Second
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxConns is MaxConns's default: a client process holds one
	// connection (clients share one per broker address).
	DefaultMaxConns = 10000
	writeTimeout    = 30 * time.Second
	// maxInflight bounds the requests of one connection being handled at
	// once (a push consumer holds one long poll per queue).
	maxInflight = 1024
)

// Server serves RocketMQ's remoting protocol over an engine: the name
// server's requests and the broker's, on one listener.
type Server struct {
	eng     *engine.Engine
	opts    Options
	lim     Limits
	log     *slog.Logger
	offsets *offsetStore
	handles *handles
	clients *registry
	locks   *lockTable
	tx      txState
	access  *access.Store
	audit   *access.Audit

	// reported holds the request codes already logged as unsupported;
	// reportedCodes is how many (both bounded by maxCountedCodes).
	reported      sync.Map
	reportedCodes atomic.Int64
	// requests counts the requests served, by code (*atomic.Int64);
	// requestCodes is how many codes it holds.
	requests     sync.Map
	requestCodes atomic.Int64
	// metrics is what /metrics shows of the adapter.
	metrics *metrics

	done      chan struct{}
	workers   workers // run the connections' request handlers
	closeOnce sync.Once
	// ctx ends with Close: engine calls in flight end with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[*conn]struct{}
	lns   []net.Listener
}

// New returns the adapter over eng; it opens the consumer offsets in
// opts.OffsetsDir.
func New(eng *engine.Engine, opts Options) (*Server, error) {
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
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// Never below one message of the largest size with its headers.
	opts.MaxFrame = min(max(opts.MaxFrame, opts.Limits.MaxBodyBytes+opts.Limits.MaxHeaderBytes+64<<10), 1<<30)
	offs, err := openOffsets(opts.OffsetsDir)
	if err != nil {
		return nil, err
	}
	offs.syncLog = eng.Sync
	hs, err := openHandles(opts.OffsetsDir)
	if err != nil {
		return nil, err
	}
	s := &Server{eng: eng, opts: opts, log: opts.Logger, offsets: offs, handles: hs,
		lim:  Limits{MaxFrame: opts.MaxFrame, MaxHeader: opts.Limits.MaxHeaderBytes + 32<<10, MaxExtFields: 64},
		done: make(chan struct{}), conns: map[*conn]struct{}{}, access: opts.Access, audit: opts.Audit}
	s.workers.done = s.done
	if s.access == nil {
		// A token alone cannot make Open fail: no file is read.
		s.access, _ = access.Open(access.Options{AuthToken: opts.AccessSecret, Logger: opts.Logger})
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.metrics = newMetrics(s.openConns)
	s.clients = newRegistry(s.notifyGroup)
	s.locks = newLockTable()
	if opts.TransactionTimeout <= 0 {
		s.opts.TransactionTimeout = txTimeout
	}
	if opts.TransactionCheckInterval <= 0 {
		s.opts.TransactionCheckInterval = 30 * time.Second
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.checkLoop(s.opts.TransactionCheckInterval) }()
	go func() { defer s.wg.Done(); s.flushLoop() }()
	return s, nil
}

// Serve accepts connections on ln until Close; it returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		ln.Close()
		return nil
	default:
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	// backoff is the wait after a failed accept; logged says a run of
	// failures was logged (once, then at each wait of a second).
	var backoff time.Duration
	logged := false
	var lastRefusal time.Time // when a connection past MaxConns was last logged
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			if !transientAccept(err) {
				return fmt.Errorf("accept remoting connections: %w", err)
			}
			// Out of file descriptors (clients holding many connections)
			// or a connection reset before it was accepted: the listener
			// is sound, so wait and accept again rather than end the
			// service, and the broker with it.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			if backoff == time.Second || !logged {
				logged = true
				s.log.Warn("remoting: accepting a connection failed; trying again", "err", err, "wait", backoff)
			}
			select {
			case <-time.After(backoff):
			case <-s.done:
				return nil
			}
			continue
		}
		backoff, logged = 0, false
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			nc.Close()
			continue
		default:
		}
		if n := len(s.conns); s.opts.MaxConns > 0 && n >= s.opts.MaxConns {
			s.mu.Unlock()
			if now := time.Now(); now.Sub(lastRefusal) >= 10*time.Second {
				lastRefusal = now
				s.log.Warn("remoting: refusing a connection: as many are open as allowed (logged at most every 10 s)",
					"remote", nc.RemoteAddr().String(), "open", n, "max", s.opts.MaxConns)
			}
			s.metrics.closed.WithLabelValues(closeLimit).Inc()
			nc.Close() // after the log line: a client that sees the close finds it
			continue
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Close stops accepting, ends long polls, closes every connection and
// waits for their handlers, then makes the offsets durable.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.done)
		s.cancel()
		for _, ln := range s.lns {
			ln.Close()
		}
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	s.workers.wait() // the connections' handlers have returned: their workers leave
	return s.offsets.close()
}

// Requests returns how many requests of a code were answered or handled.
func (s *Server) Requests(code int) int64 {
	if v, ok := s.requests.Load(int32(code)); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// maxCountedCodes bounds the distinct request codes counted and logged
// one by one: a client may cycle through the 2^32 codes a JSON header can
// carry, and each new one would otherwise cost a log line and stay in
// requests and reported for the life of the process. RocketMQ's own codes
// number a few hundred.
const maxCountedCodes = 1024

// codeOther is the key that counts the requests of codes past
// maxCountedCodes, in requests and in reported.
const codeOther int32 = -1 << 31

// trackedCode is code, or codeOther once m holds maxCountedCodes codes
// and not this one. The bound may be passed by a few codes when several
// connections add new ones at once; it only keeps the maps from growing
// with what clients send.
func trackedCode(m *sync.Map, n *atomic.Int64, code int32) int32 {
	if _, ok := m.Load(code); ok {
		return code
	}
	if n.Load() >= maxCountedCodes {
		return codeOther
	}
	return code
}

func (s *Server) count(code int32) {
	code = trackedCode(&s.requests, &s.requestCodes, code)
	v, ok := s.requests.Load(code)
	if !ok {
		var loaded bool
		if v, loaded = s.requests.LoadOrStore(code, new(atomic.Int64)); !loaded {
			s.requestCodes.Add(1)
		}
	}
	v.(*atomic.Int64).Add(1)
}

// transientAccept says whether an accept error leaves the listener
// usable: a timeout, a connection aborted before it was accepted, or the
// process or system out of file descriptors or buffers for now.
func transientAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// openConns is how many connections are open, for the metrics.
func (s *Server) openConns() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(len(s.conns))
}

func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.clients.dropConn(c)
	s.locks.dropConn(c)
	s.wg.Done()
}
