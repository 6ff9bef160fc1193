package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/stream"
)

// The streaming receive: POST .../stream is one long exchange in both
// directions at once (HTTP/1.1 full duplex, chunked both ways). The
// response is NDJSON, one api.ReceiveResponse a line: a batch of leased
// messages, or (messages empty) the count of an ack line made. The request
// body is NDJSON too, one api.StreamAck a line. The broker leases ahead of
// the acks within the stream's window (package stream), so a consumer has
// its next batch while it works on the last one, and no round trip per
// batch.
//
// The exchange ends when the request body ends (the client's "no more
// acks": every ack line before it is made and answered first), when the
// client goes away, when the broker shuts down, or at an error. Leasing
// needs a body whose end is not known yet: a chunked one (HTTP/1.1
// Transfer-Encoding: chunked, which clients use for a body they write
// while they read). A body of known length is a fixed list of ack lines:
// they are made and answered, and nothing is leased. An error once the
// stream has begun is the last line, an api.Error; an ack line that fails
// was not acked (all or nothing, as POST .../ack). What was leased ahead
// of the consumer and never written when the stream ends is released (engine.Release: ready again at once, no attempt
// counted); what was written, even in part, stays leased until its lease
// ends, as with receive. Leasing stops as soon as the request body ends:
// no ack could come for what it would lease.

// streamParams are the query parameters of POST .../stream.
var streamParams = []string{"max", "window", "invisible", "body_encoding"}

// streamOptions reads the query parameters of POST .../stream.
func streamOptions(r *http.Request) (stream.Options, api.BodyEncoding, error) {
	opts := stream.Options{Topic: pathTopic(r), Group: r.PathValue("group")}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return opts, "", errs.New(errs.InvalidArgument, "query %q is malformed: %v", r.URL.RawQuery, err)
	}
	if err := onlyParams(q, streamParams...); err != nil {
		return opts, "", err
	}
	for _, p := range []struct {
		name string
		to   *int
	}{{"max", &opts.Max}, {"window", &opts.Window}} {
		if !q.Has(p.name) {
			continue
		}
		v, err := strconv.Atoi(q.Get(p.name))
		if err != nil || v < 1 {
			return opts, "", errs.New(errs.InvalidArgument, "%s %q is not a positive integer", p.name, q.Get(p.name))
		}
		*p.to = v
	}
	if q.Has("invisible") {
		if opts.Invisible, err = positiveDurationField("invisible", q.Get("invisible")); err != nil {
			return opts, "", err
		}
		if opts.Invisible == 0 {
			return opts, "", errs.New(errs.InvalidArgument, "invisible is empty; leave it out for the default")
		}
	}
	enc := api.BodyEncoding(q.Get("body_encoding"))
	if q.Has("body_encoding") && enc == "" {
		return opts, "", errs.New(errs.InvalidArgument, "body_encoding is empty; leave it out for the default")
	}
	if err := checkBodyEncoding(enc); err != nil {
		return opts, "", err
	}
	return opts, enc, opts.Validate()
}

// stream serves POST /v1/topics/{topic}/groups/{group}/stream.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request) {
	opts, enc, err := streamOptions(r)
	if err != nil {
		h.refuseStream(w, r, err)
		return
	}
	select {
	case h.streams <- struct{}{}:
		defer func() { <-h.streams }()
	default:
		h.refuseStream(w, r, errs.New(errs.ResourceExhausted, "there are %d streams open; the limit is %d (-max-streams)", len(h.streams), cap(h.streams)))
		return
	}
	st, err := stream.Open(h.eng, opts)
	if err != nil {
		h.refuseStream(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		h.writeError(w, errs.Wrap(errs.Internal, err, "this connection cannot stream both ways"))
		return
	}
	out := &lineWriter{h: h, w: w, rc: rc, timeout: h.opts.WriteTimeout, chunked: r.ProtoAtLeast(1, 1)}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.draining, cancel)
	defer stop()
	clean := make(chan bool, 1)
	readDone := make(chan struct{})
	if r.ContentLength >= 0 {
		h.streamFixed(w, r, rc, st, out, cancel, readDone)
		return
	}
	// A chunked stream may idle for as long as the client keeps it: no
	// read deadline; each line written gets the write timeout.
	_ = rc.SetReadDeadline(time.Time{})
	go func() {
		// The end of the ack lines (the body's end, or a failure) ends
		// the leasing at once: no more acks can come for what it leases.
		clean <- h.streamAcks(r, rc, st, out, cancel, readDone)
	}()
	h.streamDeliver(ctx, st, out, enc)
	cancel()
	st.Close() // what was leased ahead and not written goes back
	cut := false
	select {
	case <-readDone:
	default:
		// The stream ended on the broker's side (shutdown, an error, the
		// client gone) while the body is still being read: stop reading.
		// (Never once the reader has seen the body's end: the server then
		// reads the connection in the background, and a deadline would
		// cut that read, so this exchange closes its connection.)
		_ = rc.SetReadDeadline(time.Now())
		cut = true
	}
	if ok := <-clean; ok && !cut {
		out.end()
		return
	}
	// The request body was not read to its end: what is left of it must
	// not be taken for the connection's next request.
	out.closeConn()
}

// refuseStream answers a stream refused before it starts (bad options, too
// many streams, an unknown group) and closes the connection: its body, ack
// lines that may never end, is left unread. Left open, the server would
// read that body to its end before answering, so a streaming client saw
// the refusal only when -read-timeout cut the read (a minute by default).
func (h *Handler) refuseStream(w http.ResponseWriter, r *http.Request, err error) {
	closeUnread(w, r)
	h.writeError(w, err)
}

// streamFixed serves a stream whose body has a known length (not chunked):
// a fixed list of ack lines, its end known from the start. They are made
// and answered, and nothing is leased, since no ack could follow. The body
// is read whole first, as any request's body (its size limit, the read
// timeout, the drain), so that the client's time to send it is not spent
// on the broker's acks.
func (h *Handler) streamFixed(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, st *stream.Stream, out *lineWriter, cancel func(), readDone chan<- struct{}) {
	body, err := h.readFixedBody(w, r, rc)
	if err != nil {
		out.fail(err)
		out.closeConn()
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if h.streamAcks(r, rc, st, out, cancel, readDone) {
		out.end()
	} else {
		out.closeConn()
	}
}

// readFixedBody reads a stream's body of known length as readBody does,
// and no longer once the broker drains.
func (h *Handler) readFixedBody(w http.ResponseWriter, r *http.Request, rc *http.ResponseController) ([]byte, error) {
	defer context.AfterFunc(h.draining, func() { _ = rc.SetReadDeadline(time.Now()) })()
	body, err := h.readBody(w, r)
	if err != nil && h.draining.Err() != nil {
		return nil, errs.New(errs.Unavailable, "broker is shutting down; the stream ends")
	}
	return body, err
}

// streamDeliver writes batches until ctx ends or a receive fails. A batch
// whose write failed may have reached the client in part: it stays leased,
// as a receive's answer that failed would (its lease ends, the message
// comes back with its attempt counted, and a message that kills its
// consumer still reaches its dead letter). What was leased ahead and never
// written is released by the caller (Stream.Close).
func (h *Handler) streamDeliver(ctx context.Context, st *stream.Stream, out *lineWriter, enc api.BodyEncoding) {
	for {
		got, err := st.Next(ctx)
		if len(got) > 0 {
			bp := receiveBufs.Get().(*[]byte)
			b := appendReceiveResponse((*bp)[:0], got, 0, enc)
			// The batches of one lease are flushed together.
			written, ok := out.write(b, st.Ahead() == 0)
			if cap(b) <= maxPooledReceive {
				*bp = b
				receiveBufs.Put(bp)
			}
			if !written {
				// The stream had ended (an error line, a failed
				// write): not a byte of this batch went out.
				st.Release(got)
			}
			if !ok {
				return
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			if h.draining.Err() != nil {
				out.fail(errs.New(errs.Unavailable, "broker is shutting down; the stream ends"))
			}
			return
		default:
			out.fail(err)
			return
		}
	}
}

// streamAcks reads ack lines until the body ends, and makes and answers
// each in order (stream.AckLines: the lines that arrive while an ack is
// being made are made together). A line that cannot be read, parsed or
// acked ends the stream with its error, after the lines before it are
// answered. bodyEnded is called when the reader stops, readDone closed
// after. It reports whether the body was read to its end and every line
// in it answered.
//
// The acks run under a context the client's half-close does not end (a
// client may shut its side once its body is sent, and still wait for the
// answers): they end with a failure, the broker's, or a write that fails.
func (h *Handler) streamAcks(r *http.Request, rc *http.ResponseController, st *stream.Stream, out *lineWriter, bodyEnded func(), readDone chan<- struct{}) bool {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	// Once the stream's last line is written (an error, the broker
	// draining), no ack is made that could not be answered.
	out.onDone(cancel)
	lines := make(chan []string, ackLinesQueued)
	queue := &ackQueue{freed: make(chan struct{}, 1)}
	var readErr error
	var eof bool
	go func() {
		defer close(readDone)
		defer close(lines)
		eof, readErr = h.readAckLines(ctx, r, lines, queue)
		bodyEnded()
	}()
	var b []byte
	answered := true
	st.AckLines(ctx, lines, func(acked int, err error) bool {
		queue.give()
		if err != nil {
			out.fail(errs.Wrap(errs.CodeOf(err), err, "an ack line failed (nothing of it acked)"))
			answered = false
			return false
		}
		b = append(strconv.AppendInt(append(b[:0], `{"messages":[],"acked":`...), int64(acked), 10), "}\n"...)
		_, answered = out.write(b, true)
		return answered
	})
	if !answered {
		// Acking stopped early: stop the reader's read of the body too.
		cancel()
		_ = rc.SetReadDeadline(time.Now())
	}
	// Wait for the reader: its error comes after every line it read.
	for range lines {
	}
	if !eof {
		// The server would wait for the rest of the body after the
		// handler returns; it is not wanted.
		_ = rc.SetReadDeadline(time.Now())
	}
	if readErr != nil {
		out.fail(readErr)
	}
	return answered && eof && readErr == nil
}

// readAckLines reads and checks the ack lines of r's body into lines. It
// returns at the body's end (eof), or with the error of the first bad
// line; a failed read (the client gone, the stream over) ends it quietly.
func (h *Handler) readAckLines(ctx context.Context, r *http.Request, lines chan<- []string, queue *ackQueue) (eof bool, err error) {
	limit := int(min(h.opts.MaxRequestBytes, maxAckLine))
	sc := lineScanner(r.Body, limit)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.Trim(line, " \t\r")) == 0 {
			continue
		}
		var in api.StreamAck
		err := decodeBody(line, &in, false)
		if err == nil {
			err = checkAckLine(in.Ack)
		}
		if err != nil {
			return false, errs.Wrap(errs.CodeOf(err), err, "ack line %d (nothing of it acked)", n)
		}
		if !queue.take(ctx, len(in.Ack)) {
			return false, nil
		}
		select {
		case lines <- in.Ack:
		case <-ctx.Done():
			return false, nil
		}
	}
	switch err := sc.Err(); {
	case err == nil:
		return true, nil
	case errors.Is(err, bufio.ErrTooLong):
		return false, errs.New(errs.TooLarge, "an ack line exceeds the limit of %d bytes (%d receipts take about %d)", limit, engine.MaxReceive, engine.MaxReceive*(engine.ReceiptChars+3))
	case errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil:
		// The stream ended on the broker's side, which stopped the read.
		return false, nil
	default:
		return false, errs.Wrap(errs.InvalidArgument, err, "the request body could not be read")
	}
}

// lineScanner scans a stream's request body line by line, lines of at
// most limit bytes.
func lineScanner(r io.Reader, limit int) *bufio.Scanner {
	body := &errReader{r: r}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, min(limit, 4<<10)), limit)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		// A read that failed hands the scanner what it has as a last
		// line; a line cut off by the failure is not the client's line.
		if atEOF && len(data) > 0 && body.err != nil && body.err != io.EOF && bytes.IndexByte(data, '\n') < 0 {
			return 0, nil, body.err
		}
		return bufio.ScanLines(data, atEOF)
	})
	return sc
}

// errReader remembers the error its reader returned.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// checkAckLine checks an ack line's receipts as POST .../ack does.
func checkAckLine(ack []string) error {
	switch {
	case len(ack) == 0:
		return errs.New(errs.InvalidArgument, "ack is empty; give at least one receipt")
	case len(ack) > engine.MaxReceive:
		return errs.New(errs.TooLarge, "ack has %d receipts; the limit is %d", len(ack), engine.MaxReceive)
	}
	for i, rc := range ack {
		switch {
		case rc == "":
			return errs.New(errs.InvalidArgument, "ack[%d] is empty; give a receipt", i)
		case len(rc) != engine.ReceiptChars:
			return errs.New(errs.InvalidArgument, "ack[%d]: receipt %q is malformed (a receipt has %d characters)", i, rc[:min(len(rc), 40)], engine.ReceiptChars)
		}
	}
	return nil
}

// maxAckLine bounds one ack line: 1000 receipts of 30 characters, quoted
// and separated, take about 33 KB; the rest is room for white space. A
// line is held whole while it is read, so this, not the request limit
// sized for message bodies, bounds the reader's buffer.
const maxAckLine = 64 << 10

// ackLinesQueued is how many read ack lines may wait for their ack, and
// queuedReceipts how many receipts they may hold together (about 50 B
// each decoded): lines of one receipt (a consumer acking message by
// message) queue deep, so that the acks that pile up during one fsync are
// made in the next, while a client that stops reading its answers pins
// well under a MiB.
const (
	ackLinesQueued = 1024
	queuedReceipts = 8192
)

// ackQueue counts the receipts of the ack lines read and not yet
// answered; the reader takes before it queues a line, the acker gives
// back as it answers one, in order.
type ackQueue struct {
	mu    sync.Mutex
	n     int
	costs []int         // the receipts of each queued line, oldest first
	freed chan struct{} // capacity 1: a give since the reader last looked
}

// take waits until k more receipts fit (a line always fits an empty
// queue), or ctx ends (false).
func (q *ackQueue) take(ctx context.Context, k int) bool {
	for {
		q.mu.Lock()
		if q.n == 0 || q.n+k <= queuedReceipts {
			q.n += k
			q.costs = append(q.costs, k)
			q.mu.Unlock()
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.freed:
		case <-ctx.Done():
			return false
		}
	}
}

// give frees the oldest queued line's receipts.
func (q *ackQueue) give() {
	q.mu.Lock()
	if len(q.costs) > 0 {
		q.n -= q.costs[0]
		q.costs = q.costs[1:]
	}
	q.mu.Unlock()
	select {
	case q.freed <- struct{}{}:
	default:
	}
}
