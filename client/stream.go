package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
)

// StreamOptions configures Client.Stream. Zero values take the broker's
// defaults.
type StreamOptions struct {
	// Max is the most messages in one batch (default 32, at most 1000).
	Max int
	// Window is the most messages the broker leases to this stream ahead
	// of its acks (default 1,000, or Max if larger; at most 10,000).
	Window int
	// Invisible is each message's lease (default 30s).
	Invisible time.Duration
	// BodyEncoding is the wire form of the bodies, as in ReceiveOptions.
	BodyEncoding BodyEncoding
}

// Stream is an open streaming receive (POST .../stream): the broker sends
// batches as they become visible, up to the window ahead of the acks, and
// the acks go up the same exchange. Next and Ack may be called from
// different goroutines; Next from one at a time.
type Stream struct {
	pw     *io.PipeWriter
	cancel context.CancelFunc

	// ready is closed once the broker's answer has begun (resp, rd) or
	// the exchange has failed (err): the broker answers with its first
	// line, so Stream returns before it.
	ready chan struct{}
	resp  *http.Response
	rd    *bufio.Reader
	err   error
	line  []byte // Next's buffer

	mu     sync.Mutex // serialises Ack and CloseSend
	closed bool

	acked int64 // receipts the broker confirmed acked; read by Next's goroutine
}

// Stream opens a streaming receive of topic for group (an unknown group is
// created with the defaults). It returns at once: the broker answers with
// its first line, and Next waits for it (and returns the error if the
// broker refused the stream: an unknown topic, bad options). Ack what
// Next returns with Ack; CloseSend says no more acks will come, after
// which Next returns what is still on its way and then io.EOF. Close ends
// the stream at once. Messages leased and not acked when the stream ends
// are delivered again when their leases end. A stream is never retried;
// ctx bounds the whole exchange.
func (c *Client) Stream(ctx context.Context, topic, group string, opts StreamOptions) (*Stream, error) {
	if err := required("topic", topic, "group", group); err != nil {
		return nil, err
	}
	q := url.Values{}
	if opts.Max != 0 {
		q.Set("max", strconv.Itoa(opts.Max))
	}
	if opts.Window != 0 {
		q.Set("window", strconv.Itoa(opts.Window))
	}
	if opts.Invisible != 0 {
		q.Set("invisible", opts.Invisible.String())
	}
	if opts.BodyEncoding != "" {
		q.Set("body_encoding", string(opts.BodyEncoding))
	}
	p := "/v1" + path("topics", topic, "groups", group, "stream")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+p, pr)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("hourglass client: %w", err)
	}
	req.Header.Set("Content-Type", api.StreamContentType)
	req.Header.Set("Accept", api.StreamContentType)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	s := &Stream{pw: pw, cancel: cancel, ready: make(chan struct{})}
	go func() {
		defer close(s.ready)
		// The whole stream is one response: the client's Timeout, which
		// covers a response's body, would cut it.
		hc := *c.hc
		hc.Timeout = 0
		resp, err := hc.Do(req)
		switch {
		case err != nil:
			s.err = &transportError{err}
		case resp.StatusCode != http.StatusOK:
			s.err = readError(resp)
			resp.Body.Close()
		default:
			s.resp, s.rd = resp, bufio.NewReaderSize(resp.Body, 64<<10)
			return
		}
		pw.CloseWithError(s.err)
	}()
	return s, nil
}

// Next returns the next batch of leased messages, waiting for one. It
// returns io.EOF when the stream ended after CloseSend, and an *Error when
// the broker refused the stream or ended it with an error (an ack line
// refused, the broker shutting down).
func (s *Stream) Next() ([]Received, error) {
	<-s.ready
	if s.err != nil {
		return nil, s.err
	}
	for {
		line, err := s.readLine()
		if len(bytes.TrimSpace(line)) == 0 {
			if err == io.EOF {
				return nil, io.EOF
			}
			if err != nil {
				return nil, &transportError{err}
			}
			continue
		}
		if bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte(`{"error"`)) {
			return nil, streamError(line)
		}
		var a receiveAnswer
		if derr := a.decodeRaw(line); derr != nil {
			return nil, fmt.Errorf("hourglass client: stream: decode a line: %w", derr)
		}
		s.acked += int64(a.Acked)
		if len(a.Messages) > 0 {
			return a.Messages, nil
		}
		if err != nil && err != io.EOF {
			return nil, &transportError{err}
		}
	}
}

// readLine reads the next line into the stream's buffer, reused from line
// to line: nothing decoded from a line points into it (receiveAnswer
// copies every string and body out), and a batch's line is large.
func (s *Stream) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		frag, err := s.rd.ReadSlice('\n')
		s.line = append(s.line, frag...)
		if err != bufio.ErrBufferFull {
			return s.line, err
		}
	}
}

// Acked returns how many receipts the broker has confirmed acked so far,
// as Next has read the confirmations; call it from Next's goroutine.
func (s *Stream) Acked() int64 { return s.acked }

// streamError reads an error line.
func streamError(line []byte) error {
	var body api.Error
	if err := json.Unmarshal(line, &body); err != nil || body.Error.Code == "" {
		return fmt.Errorf("hourglass client: stream: unreadable error line %q", line)
	}
	return &Error{StatusCode: api.Status(body.Error.Code), Code: body.Error.Code, Message: body.Error.Message, ID: body.Error.ID}
}

// Ack sends receipts (at most 1000) to be acknowledged, all or nothing.
// It returns once the line is sent; the broker confirms it in order
// (Acked), or ends the stream with the line's error.
func (s *Stream) Ack(receipts ...string) error {
	if len(receipts) == 0 {
		return &Error{Code: errs.InvalidArgument, Message: "no receipts to ack"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("hourglass client: stream: ack after CloseSend")
	}
	b, err := json.Marshal(api.StreamAck{Ack: receipts})
	if err != nil {
		return fmt.Errorf("hourglass client: stream: encode acks: %w", err)
	}
	if _, err := s.pw.Write(append(b, '\n')); err != nil {
		return &transportError{err}
	}
	return nil
}

// CloseSend tells the broker no more acks will come: it makes those sent,
// confirms them, and ends the stream; Next returns io.EOF after the last
// line.
func (s *Stream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.pw.Close()
}

// Close ends the stream at once, whatever is on its way.
func (s *Stream) Close() error {
	_ = s.CloseSend()
	s.cancel()
	<-s.ready
	if s.resp != nil {
		return s.resp.Body.Close()
	}
	return nil
}
