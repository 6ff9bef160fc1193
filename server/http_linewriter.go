package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
)

// lineWriter writes a stream's lines, one at a time. The status line and
// headers go with the first line, so that what goes wrong before anything
// was streamed (the broker shutting down, a first ack line that is
// malformed or names an unknown receipt) is answered with its own status
// and error body, as any other call. Once a line fails, or an error line
// is written, it writes nothing more: the error is the stream's last line.
type lineWriter struct {
	h       *Handler
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// chunked: the response is chunked (HTTP/1.1), so an exchange ended
	// by closeConn writes its last chunk itself.
	chunked bool

	mu            sync.Mutex
	started, done bool
	// whenDone is called once, when done is set (onDone, setDoneLocked).
	whenDone func()
	// closes is set when the answer carries Connection: close (an error
	// answered before anything was streamed): the server closes the
	// connection after it.
	closes bool
}

// onDone registers f to be called once the stream's last line is written
// (at once if it was).
func (o *lineWriter) onDone(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		f()
		return
	}
	o.whenDone = f
}

// startLocked writes the 200 and its headers.
func (o *lineWriter) startLocked() {
	o.started = true
	o.w.Header().Set("Content-Type", api.StreamContentType)
	o.w.Header().Set("Cache-Control", "no-store")
	o.w.WriteHeader(http.StatusOK)
}

func (o *lineWriter) deadline() {
	if o.timeout > 0 {
		_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	}
}

// write writes b, whole lines, and flushes them (with anything written
// before) if flush is set or they are the first. written is false when
// the stream had already ended and nothing of b was written; ok is false
// once the stream can take no more.
func (o *lineWriter) write(b []byte, flush bool) (written, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return false, false
	}
	o.deadline()
	if !o.started {
		o.startLocked()
		flush = true
	}
	_, err := o.w.Write(b)
	if err == nil && flush {
		err = o.rc.Flush()
	}
	if err != nil {
		o.setDoneLocked()
	}
	return true, !o.done
}

// setDoneLocked marks the stream's lines over and tells whenDone.
func (o *lineWriter) setDoneLocked() {
	if o.done {
		return
	}
	o.done = true
	if o.whenDone != nil {
		o.whenDone()
	}
}

// fail ends the stream with err: its status and error body if nothing was
// streamed yet, else an api.Error line.
func (o *lineWriter) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return
	}
	o.setDoneLocked()
	o.deadline()
	if !o.started {
		// The body may not have been read to its end: the connection
		// closes after this answer.
		o.started, o.closes = true, true
		o.w.Header().Set("Connection", "close")
		o.h.writeError(o.w, err)
		return
	}
	if rec, ok := o.w.(*recorder); ok {
		rec.errCode, rec.errMsg = string(errs.CodeOf(err)), err.Error()
	}
	body := api.ErrorBody{Code: errs.CodeOf(err), Message: err.Error()}
	if he, ok := errors.AsType[*errs.Error](err); ok {
		body.ID = he.Ref
	}
	_ = json.NewEncoder(o.w).Encode(api.Error{Error: body}) // one line: Encode ends it with \n
	_ = o.rc.Flush()
}

// closeConn ends an exchange whose request body was not read to its end:
// after its last line the response is ended (the last chunk) and the
// connection closed, taken over from the server, which would otherwise
// read the rest of the body as the connection's next request.
func (o *lineWriter) closeConn() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.setDoneLocked()
	if o.closes {
		return
	}
	if !o.started {
		o.started, o.closes = true, true
		o.w.Header().Set("Connection", "close")
		o.w.WriteHeader(http.StatusOK)
		return
	}
	// Hijack drops what the response writer still buffers (it flushes
	// only the connection's buffer): flush the lines first.
	_ = o.rc.Flush()
	if conn, _, err := o.rc.Hijack(); err == nil {
		if o.chunked {
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write([]byte("0\r\n\r\n"))
		}
		_ = conn.Close()
	}
}

// end answers a stream that ended with nothing streamed: 200, no lines.
func (o *lineWriter) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	// The last chunk, written when the handler returns, gets a fresh
	// deadline: the stream may have been idle for longer than one.
	o.deadline()
	if !o.started {
		o.startLocked()
	}
}
