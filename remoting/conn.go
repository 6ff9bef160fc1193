package remoting

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one client connection. Its reader goroutine reads frames and
// hands each request to a handler on the server's workers; handlers
// answer through write, which serialises and coalesces frames. Memory is
// bounded: a read buffer of readBufSize, one frame being read, and the
// frames being handled hold at most budget bytes (the reader waits for
// handlers to finish before it reads more), and at most maxInflight
// of them; of the answers, at most maxPullsAnswering pulls' messages
// (the largest answers) are being read or wait to be written at once.
type conn struct {
	s  *Server
	nc net.Conn
	// local is the address the client reached us at: routes point there.
	local string
	// opaque numbers the requests the broker sends to the client.
	opaque atomic.Int32

	w *frameWriter // serialises and coalesces writes

	bmu      sync.Mutex
	bcond    *sync.Cond
	used     int // bytes of frames being handled
	inflight int
	budget   int

	// answering holds a token per pull that is reading messages or whose
	// answer with messages is not written yet: a connection's pulls hold
	// at most maxPullsAnswering answers (each up to maxPullBytes and one
	// message) however many it sends without reading the answers.
	answering chan struct{}
	// heldMax is the most tokens of answering held at once (for tests).
	heldMax atomic.Int32

	// notices holds the groups whose NOTIFY_CONSUMER_IDS_CHANGED is being
	// sent on this connection, each with whether another change came
	// meanwhile (noticeChanged).
	nmu     sync.Mutex
	notices map[string]bool

	// checking counts the transaction checks being sent (txcheck.go).
	checking atomic.Int32
}

// maxPullsAnswering bounds a connection's pulls reading or answering
// messages at once; its other pulls wait (a long poll holds no token).
const maxPullsAnswering = 4

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, local: nc.LocalAddr().String(), budget: 2*s.lim.MaxFrame + 1<<20, w: newFrameWriter(nc)}
	c.bcond = sync.NewCond(&c.bmu)
	c.answering = make(chan struct{}, maxPullsAnswering)
	return c
}

// holdAnswer takes a token of answering; false when the server closes
// first.
func (c *conn) holdAnswer(done <-chan struct{}) bool {
	select {
	case c.answering <- struct{}{}:
		n := int32(len(c.answering))
		for m := c.heldMax.Load(); n > m && !c.heldMax.CompareAndSwap(m, n); m = c.heldMax.Load() {
		}
		return true
	case <-done:
		return false
	}
}

// releaseAnswer returns a token of answering.
func (c *conn) releaseAnswer() { <-c.answering }

// serve reads requests until the connection ends or a frame is malformed.
func (c *conn) serve() {
	var handlers sync.WaitGroup
	defer func() {
		c.nc.Close()
		handlers.Wait()
		c.s.dropConn(c)
	}()
	if !c.handshake() {
		return
	}
	r := newFrameReader(c)
	for {
		buf, err := r.next()
		if err != nil {
			c.logReadErr(err)
			return
		}
		cmd, err := decodeFrame(buf, c.s.lim)
		if err != nil {
			c.s.metrics.closed.WithLabelValues(closeMalformed).Inc()
			c.s.log.Warn("remoting: closing a connection that sent a malformed frame", "remote", c.nc.RemoteAddr().String(), "err", err)
			return
		}
		if cmd.isResponse() {
			continue // answers to the broker's one-way notices: nothing waits for them
		}
		c.acquire(len(buf))
		handlers.Add(1)
		c.s.workers.run(func() {
			defer handlers.Done()
			defer c.release(len(buf))
			c.handle(cmd)
		})
	}
}

// handshake completes a TLS connection's handshake within the read
// timeout, as a frame must arrive once begun: a client that trickles its
// handshake is cut off then, not after the idle timeout. A plaintext
// client on a TLS listener fails here, with a log line. False when the
// connection is to be closed.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	tc.SetDeadline(time.Now().Add(c.s.opts.ReadTimeout))
	if err := tc.Handshake(); err != nil {
		select {
		case <-c.s.done:
		default:
			c.s.metrics.closed.WithLabelValues(closeTLS).Inc()
			c.s.log.Warn("remoting: closing a connection whose TLS handshake failed", "remote", c.nc.RemoteAddr().String(), "err", err)
		}
		return false
	}
	tc.SetDeadline(time.Time{})
	return true
}

func (c *conn) logReadErr(err error) {
	select {
	case <-c.s.done:
		return
	default:
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	case errors.Is(err, errFrame):
		c.s.metrics.closed.WithLabelValues(closeMalformed).Inc()
		c.s.log.Warn("remoting: closing a connection that sent a malformed frame", "remote", c.nc.RemoteAddr().String(), "err", err)
	case errors.As(err, &ne) && ne.Timeout():
		c.s.metrics.closed.WithLabelValues(closeTimeout).Inc()
		c.s.log.Info("remoting: closing a connection that was idle or too slow to send a frame", "remote", c.nc.RemoteAddr().String())
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.s.metrics.closed.WithLabelValues(closeTruncated).Inc()
		c.s.log.Warn("remoting: a connection ended inside a frame", "remote", c.nc.RemoteAddr().String())
	default:
		c.s.log.Info("remoting: connection read failed", "remote", c.nc.RemoteAddr().String(), "err", err)
	}
}

func (c *conn) acquire(n int) {
	c.bmu.Lock()
	for c.mustWaitLocked(n) {
		c.bcond.Wait()
	}
	c.used += n
	c.inflight++
	c.bmu.Unlock()
}

// mustWaitLocked says whether a frame of n bytes must wait for handlers
// to finish: one frame alone always goes, whatever its size (it was
// already bounded by MaxFrame). bmu held.
func (c *conn) mustWaitLocked(n int) bool {
	return c.inflight > 0 && (c.used+n > c.budget || c.inflight >= maxInflight)
}

func (c *conn) release(n int) {
	c.bmu.Lock()
	c.used -= n
	c.inflight--
	c.bmu.Unlock()
	c.bcond.Broadcast()
}

// handle answers one request (not a one-way one), and never panics: a
// handler's panic is logged and answered as a system error.
func (c *conn) handle(req *Command) {
	start := time.Now()
	resp := func() (resp *Command) {
		defer func() {
			if p := recover(); p != nil {
				c.s.log.Error("remoting: a request handler panicked", "code", req.Code, "panic", p)
				resp = errResp(respSystemError, "internal error")
			}
		}()
		if err := c.s.authorize(c, req); err != nil {
			return errResp(respNoPermission, err.Error())
		}
		if err := c.s.permit(c, req); err != nil {
			return errResp(respNoPermission, err.Error())
		}
		return c.s.dispatch(c, req)
	}()
	if resp != nil && resp.release != nil {
		defer resp.release()
	}
	if resp == nil || req.isOneway() {
		c.s.metrics.observe(req, nil, start)
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= flagResponse
	resp.Serialize = req.Serialize
	resp.Language = "JAVA"
	resp.Version = brokerVersion
	// Counted before the write, so that a client that has read its answer
	// finds it counted.
	c.s.metrics.observe(req, resp, start)
	if err := c.write(resp); err != nil {
		c.nc.Close()
	}
}

// write sends one frame.
func (c *conn) write(cmd *Command) error {
	b, err := cmd.encode()
	if err != nil {
		return err
	}
	return c.w.write(b)
}

// noticeChanged tells the client that group's members changed, with at
// most one notice of a group being sent at a time: changes that come
// while one is being sent make one more, after it. A client that does
// not read, in a group whose members churn, would otherwise hold a
// goroutine per change, each waiting up to the write timeout.
func (c *conn) noticeChanged(group string) {
	c.nmu.Lock()
	if _, sending := c.notices[group]; sending {
		c.notices[group] = true
		c.nmu.Unlock()
		return
	}
	if c.notices == nil {
		c.notices = map[string]bool{}
	}
	c.notices[group] = false
	c.nmu.Unlock()
	go func() {
		for {
			c.notify(codeNotifyConsumerIDs, map[string]string{"consumerGroup": group})
			c.nmu.Lock()
			if !c.notices[group] {
				delete(c.notices, group)
				c.nmu.Unlock()
				return
			}
			c.notices[group] = false
			c.nmu.Unlock()
		}
	}()
}

// notify sends a one-way request to the client.
func (c *conn) notify(code int32, ext map[string]string) { c.notifyBody(code, ext, nil) }

// notifyBody sends a one-way request with a body to the client.
func (c *conn) notifyBody(code int32, ext map[string]string, body []byte) {
	cmd := &Command{Code: code, Language: "JAVA", Version: brokerVersion, Opaque: c.opaque.Add(1),
		Flag: flagOneway, ExtFields: ext, Body: body}
	if err := c.write(cmd); err != nil {
		c.nc.Close()
	}
}

// errResp is a response with a code and a remark.
func errResp(code int32, remark string) *Command {
	return &Command{Code: code, Remark: remark}
}

// okResp is a success with extFields.
func okResp(ext map[string]string) *Command { return &Command{Code: respSuccess, ExtFields: ext} }

// unsupported answers a request code hourglass does not serve, and logs
// it once per code.
func (s *Server) unsupported(req *Command) *Command {
	code := trackedCode(&s.reported, &s.reportedCodes, req.Code)
	if _, seen := s.reported.LoadOrStore(code, true); !seen {
		s.reportedCodes.Add(1)
		if code == codeOther {
			s.log.Warn("remoting: request code not supported; so many codes were logged already that no other is (logged once)", "code", req.Code, "language", req.Language, "logged", maxCountedCodes)
		} else {
			s.log.Warn("remoting: request code not supported (logged once per code)", "code", req.Code, "language", req.Language)
		}
	}
	return errResp(respRequestCodeNotSupp, "request code "+strconv.Itoa(int(req.Code))+" not supported by hourglass")
}
