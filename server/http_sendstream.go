package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
)

// The streaming send: POST /v1/topics/{topic}/stream is one exchange in
// both directions at once (HTTP/1.1 full duplex, chunked both ways), as
// the streaming receive is. Each request line is one api.SendMessage;
// each response line answers one message line, in the order they were
// sent: {"receipt":{...}} once the message is stored (in sync flush mode
// after fdatasync, as POST .../messages), or {"refused":{...}} when it
// was not (a bad line, a limit, an unknown topic: the message only; the
// stream goes on). Messages are sent to the engine as their lines arrive,
// up to sendStreamWindow at once, so the lines of one round trip share a
// group commit and a write, without a request per message: a profile of
// one message per request put most of the time in HTTP's per-request
// work (issue 31), not in the send.
//
// The stream ends when the request body ends (every line before it is
// answered first), when the client goes away, when the broker shuts
// down, or at a line it cannot read (longer than -max-request-bytes).
// Then, if something went wrong, the last line is an api.Error: every
// line read before it was answered, and no line after it was read, so a
// message without an answer was not stored.

// sendStreamWindow is the most messages of one stream in flight (read
// and not yet answered): it bounds what a client that stops reading its
// answers pins, and is well above what one group commit takes.
const sendStreamWindow = 1024

// sendSlot is one message line on its way: done is closed when its
// answer is known.
type sendSlot struct {
	done chan struct{}
	rc   engine.Receipt
	err  error
}

// sendStream serves POST /v1/topics/{topic}/stream.
func (h *Handler) sendStream(w http.ResponseWriter, r *http.Request) {
	if q, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		h.refuseStream(w, r, errs.New(errs.InvalidArgument, "query %q is malformed: %v", r.URL.RawQuery, err))
		return
	} else if err := onlyParams(q); err != nil {
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
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		h.writeError(w, errs.Wrap(errs.Internal, err, "this connection cannot stream both ways"))
		return
	}
	out := &lineWriter{h: h, w: w, rc: rc, timeout: h.opts.WriteTimeout, chunked: r.ProtoAtLeast(1, 1)}
	if r.ContentLength < 0 {
		// A chunked stream may idle for as long as the client keeps it.
		_ = rc.SetReadDeadline(time.Time{})
	}
	// Shutdown stops the reading; the lines read are still answered.
	stop := context.AfterFunc(h.draining, func() { _ = rc.SetReadDeadline(time.Now()) })
	defer stop()
	slots := make(chan *sendSlot, sendStreamWindow)
	writerDone := make(chan bool, 1)
	go func() { writerDone <- h.writeSendAnswers(slots, out, rc) }()
	eof, readErr := h.readSendLines(r, slots)
	close(slots)
	answered := <-writerDone
	switch {
	case readErr != nil:
		out.fail(readErr)
	case !eof && h.draining.Err() != nil:
		out.fail(errs.New(errs.Unavailable, "broker is shutting down; the stream ends"))
	}
	if eof && readErr == nil && answered {
		out.end()
		return
	}
	// The body was not read to its end: the connection must not be
	// reused for a next request.
	_ = rc.SetReadDeadline(time.Now())
	out.closeConn()
}

// readSendLines reads message lines until the body ends (eof) and hands
// each to the engine, its slot queued in order. A line that is not a
// valid message gets its refusal as its answer; a line that cannot be
// read ends the reading with err (nil for a read cut by the broker or a
// client gone).
func (h *Handler) readSendLines(r *http.Request, slots chan<- *sendSlot) (eof bool, err error) {
	topic := pathTopic(r)
	// A send answered to a client that went away is still made: its
	// answer only is lost, as with POST .../messages.
	ctx := context.WithoutCancel(r.Context())
	limit := int(h.opts.MaxRequestBytes)
	sc := lineScanner(r.Body, limit)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.Trim(line, " \t\r")) == 0 {
			n--
			continue
		}
		slot := &sendSlot{done: make(chan struct{})}
		var in api.SendMessage
		var req engine.SendRequest
		if !readSendFast(line, &in) {
			slot.err = decodeBody(line, &in, false)
		}
		if slot.err == nil {
			req, slot.err = sendRequest(&in, topic)
		}
		if slot.err != nil {
			slot.err = errs.Wrap(errs.CodeOf(slot.err), slot.err, "line %d", n)
			close(slot.done)
		} else {
			go func() {
				slot.rc, slot.err = h.eng.Send(ctx, req.Message, req.When)
				close(slot.done)
			}()
		}
		slots <- slot // waits while sendStreamWindow are in flight
	}
	switch err := sc.Err(); {
	case err == nil:
		return true, nil
	case errors.Is(err, bufio.ErrTooLong):
		return false, errs.New(errs.TooLarge, "a message line exceeds the limit of %d bytes (-max-request-bytes); the stream ends, no line after it was read", limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	default:
		if r.Context().Err() != nil {
			return false, nil // the client went away
		}
		return false, errs.Wrap(errs.InvalidArgument, err, "the request body could not be read")
	}
}

// writeSendAnswers writes the answer of each slot in order, flushing when
// the next answer is not ready yet, so that the answers of one group
// commit go out in one write and none waits for a later one. It reports
// whether every answer was written; after a failed write it waits for the
// rest without writing and stops the reading.
func (h *Handler) writeSendAnswers(slots <-chan *sendSlot, out *lineWriter, rc *http.ResponseController) bool {
	bp := receiptBufs.Get().(*[]byte)
	b := (*bp)[:0]
	ok := true
	next, more := <-slots
	for more {
		slot := next
		<-slot.done
		if ok {
			b = appendSendAnswer(b, slot)
		}
		// The next slot, if one is queued: its answer goes in this
		// write only if it is known already.
		ready := false
		select {
		case next, more = <-slots:
			if more {
				select {
				case <-next.done:
					ready = true
				default:
				}
			}
		default:
			next, more = nil, true
		}
		if ok && len(b) > 0 && (!ready || len(b) >= 32<<10) {
			if _, ok = out.write(b, true); !ok {
				_ = rc.SetReadDeadline(time.Now())
			}
			b = b[:0]
		}
		if next == nil && more {
			next, more = <-slots
		}
	}
	if ok && len(b) > 0 {
		_, ok = out.write(b, true)
	}
	if cap(b) <= maxPooledReceipts {
		*bp = b
		receiptBufs.Put(bp)
	}
	return ok
}

// appendSendAnswer appends one answer line: the receipt, or the refusal.
func appendSendAnswer(b []byte, slot *sendSlot) []byte {
	if slot.err == nil {
		var dues dueTexts
		b = append(b, `{"receipt":`...)
		b = dues.appendReceipt(b, &slot.rc)
		return append(b, "}\n"...)
	}
	code, msg := errs.CodeOf(slot.err), slot.err.Error()
	if _, ok := errors.AsType[*errs.Error](slot.err); !ok {
		msg = "internal error: " + msg
	}
	b = append(b, `{"refused":{"code":`...)
	b = appendJSONString(b, string(code))
	b = append(b, `,"message":`...)
	b = appendJSONString(b, msg)
	if he, ok := errors.AsType[*errs.Error](slot.err); ok && he.Ref != "" {
		b = append(b, `,"id":`...)
		b = appendJSONString(b, he.Ref)
	}
	return append(b, "}}\n"...)
}
