package remoting

import (
	"bufio"
	"net"
	"runtime"
	"sync"
	"time"
)

// readBufSize is a connection's read buffer: one read syscall takes the
// frames a client pipelines (a producer's concurrent sends), where two
// read syscalls per frame (length, then the rest) took a tenth of the
// broker's CPU under a send load.
const readBufSize = 32 << 10

// frameReader reads frames through a buffer, moving the read deadline as
// readFrame's contract says: the idle timeout covers the wait for a
// frame's first byte, the read timeout the rest.
type frameReader struct {
	c  *conn
	br *bufio.Reader
	dr deadlineReader
}

func newFrameReader(c *conn) *frameReader {
	r := &frameReader{c: c, dr: deadlineReader{c: c}}
	r.br = bufio.NewReaderSize(&r.dr, readBufSize)
	return r
}

// next reads one frame. A frame whose first bytes are already buffered
// has begun: it gets the read timeout from now.
func (r *frameReader) next() ([]byte, error) {
	opts := &r.c.s.opts
	if r.br.Buffered() > 0 {
		r.dr.started = true
		r.c.nc.SetReadDeadline(time.Now().Add(opts.ReadTimeout))
	} else {
		r.dr.started = false
		r.c.nc.SetReadDeadline(time.Now().Add(opts.IdleTimeout))
	}
	return readFrame(r.br, r.c.s.lim)
}

// deadlineReader moves the read deadline to the read timeout once the
// first byte of a frame has arrived.
type deadlineReader struct {
	c       *conn
	started bool
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	n, err := r.c.nc.Read(p)
	if n > 0 && !r.started {
		r.started = true
		r.c.nc.SetReadDeadline(time.Now().Add(r.c.s.opts.ReadTimeout))
	}
	return n, err
}

// frameWriter serialises a connection's frames and coalesces them: a
// writer that finds another writing queues its frame and waits; the one
// writing takes everything queued into one writev. The answers to a
// group commit's sends wake together, and went out in one write syscall
// each (an eighth of the broker's CPU under a send load); now those of
// one connection share one. Each caller still waits until its frame is
// written, so a connection's unwritten answers stay bounded by its
// handlers (conn's budget), and a slow reader is cut off by writeTimeout.
type frameWriter struct {
	nc      net.Conn
	mu      sync.Mutex
	cond    *sync.Cond
	queue   net.Buffers // frames queued, not yet taken by a writer
	writing bool
	queued  uint64 // frames ever queued
	written uint64 // frames ever written: the first written of queued
	err     error  // the first failed write; every later write fails
	rounds  int    // writes made (for tests)
}

func newFrameWriter(nc net.Conn) *frameWriter {
	w := &frameWriter{nc: nc}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// write sends frame b and returns once it is written, or the connection
// failed.
func (w *frameWriter) write(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.queue = append(w.queue, b)
	w.queued++
	mine := w.queued
	for w.written < mine && w.err == nil {
		if w.writing {
			w.cond.Wait()
			continue
		}
		// Nobody writes: this caller writes what is queued (its own
		// frame among it), then hands over to any that queued meanwhile.
		w.writing = true
		w.rounds++
		// Yield once before taking the queue. The answers to one group
		// commit's sends are woken together and queued on this P: the
		// first to get here used to write its frame alone while the
		// others were still being encoded, and the client then read
		// about one answer per read syscall and woke its threads for
		// each. Run first, they queue their frames behind this writer
		// and go out in this write (0.5 to 0.6 reads an answer in the
		// remoting bench's sends, against 1.0; docs/benchmarks.md,
		// rmq-remoting-yield). With nothing else runnable the yield
		// returns at once.
		w.mu.Unlock()
		runtime.Gosched()
		w.mu.Lock()
		batch, upto := w.queue, w.queued
		w.queue = nil
		w.mu.Unlock()
		w.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, err := batch.WriteTo(w.nc)
		w.mu.Lock()
		w.writing = false
		if err != nil && w.err == nil {
			w.err = err
		}
		if err == nil {
			w.written = upto
		}
		w.cond.Broadcast()
	}
	if w.written >= mine {
		return nil
	}
	return w.err
}
