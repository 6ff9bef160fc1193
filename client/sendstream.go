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
	"runtime"
	"sync"

	"github.com/hourglass-mq/hourglass/api"
)

// SendStream is an open streaming send (POST /v1/topics/{topic}/stream):
// messages go up one long exchange and their receipts come back on it,
// in order, without a request per message. Send may be called from many
// goroutines at once; their messages share the exchange, and those sent
// while the broker stores others go together (one write, one group
// commit).
type SendStream struct {
	pw     *io.PipeWriter
	cancel context.CancelFunc

	mu      sync.Mutex
	pending []byte            // lines not yet handed to the pipe
	waiters []chan sendAnswer // one per line sent, oldest first
	closed  bool              // CloseSend was called
	ended   error             // set once the stream is over: what unanswered sends get
	wake    chan struct{}     // capacity 1: pending has lines
	spare   []byte            // the writer's other buffer
	done    chan struct{}     // closed when the reader has finished
	wdone   chan struct{}     // closed when the writer has finished
	endErr  error             // what ended the stream: an error line, a failed transport

	same repeats // the reader's (answer's) last topic and due_time
}

// sendAnswer is the answer to one line.
type sendAnswer struct {
	r   Receipt
	err error
}

// SendStream opens a streaming send to topic. It returns at once; a
// refusal by the broker (auth, too many streams) is the error of the
// first Send. Close ends it. A stream is never retried: a Send whose
// answer did not come back (the broker or the connection gone) fails with
// a transport error and may or may not have been stored, as a failed Send
// of one request; a Send refused before the broker read its line was not
// stored. ctx bounds the whole exchange.
func (c *Client) SendStream(ctx context.Context, topic string) (*SendStream, error) {
	if err := required("topic", topic); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1"+path("topics", topic, "stream"), pr)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("hourglass client: %w", err)
	}
	req.Header.Set("Content-Type", api.StreamContentType)
	req.Header.Set("Accept", api.StreamContentType)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	s := &SendStream{pw: pw, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{}), wdone: make(chan struct{})}
	go s.write()
	go func() {
		defer close(s.done)
		// The whole stream is one response: the client's Timeout would cut it.
		hc := *c.hc
		hc.Timeout = 0
		resp, err := hc.Do(req)
		switch {
		case err != nil:
			s.finish(&transportError{err})
		case resp.StatusCode != http.StatusOK:
			s.finish(readError(resp))
			resp.Body.Close()
		default:
			s.finish(s.read(resp.Body))
			resp.Body.Close()
		}
		pw.CloseWithError(errors.New("hourglass client: send stream ended"))
	}()
	return s, nil
}

// Send sends m on the stream and returns its receipt once the broker has
// stored it (in sync flush mode, after fdatasync), or the broker's
// refusal of that message (an *Error; the stream goes on). If ctx ends
// first, Send returns its error; the message may still be stored.
func (s *SendStream) Send(ctx context.Context, m Message) (Receipt, error) {
	in, err := m.wire()
	if err != nil {
		return Receipt{}, err
	}
	line := appendSendMessage(nil, &in)
	ch := make(chan sendAnswer, 1)
	s.mu.Lock()
	switch {
	case s.ended != nil:
		err = s.ended
	case s.closed:
		err = errors.New("hourglass client: send stream: Send after Close")
	}
	if err != nil {
		s.mu.Unlock()
		return Receipt{}, err
	}
	s.pending = append(append(s.pending, line...), '\n')
	s.waiters = append(s.waiters, ch)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case a := <-ch:
		return a.r, a.err
	case <-ctx.Done():
		return Receipt{}, ctx.Err()
	}
}

// write hands the pending lines to the request body, all that piled up
// during the last write at once, until CloseSend and the last line.
func (s *SendStream) write() {
	defer close(s.wdone)
	for range s.wake {
		// Let the senders woken with this one add their lines first:
		// one write for all of them.
		runtime.Gosched()
		s.mu.Lock()
		b, last := s.pending, s.closed
		s.pending, s.spare = s.spare[:0], nil
		s.mu.Unlock()
		if len(b) > 0 {
			if _, err := s.pw.Write(b); err != nil {
				return // the reader fails the waiters
			}
		}
		s.mu.Lock()
		s.spare = b[:0]
		s.mu.Unlock()
		if last {
			s.pw.Close()
			return
		}
	}
}

// read hands each answer line to the oldest waiter until the body ends;
// it returns what the waiters left then get.
func (s *SendStream) read(body io.Reader) error {
	rd := bufio.NewReaderSize(body, 64<<10)
	var line []byte
	for {
		frag, err := rd.ReadSlice('\n')
		line = append(line[:0], frag...)
		for errors.Is(err, bufio.ErrBufferFull) {
			frag, err = rd.ReadSlice('\n')
			line = append(line, frag...)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if perr := s.answer(line); perr != nil {
				return perr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &transportError{err}
		}
	}
}

// answer takes one line: an answer for the oldest waiter, or the error
// that ends the stream.
func (s *SendStream) answer(line []byte) error {
	var a api.SendStreamAnswer
	var fast Receipt
	if rest, ok := bytes.CutPrefix(line, []byte(`{"receipt":`)); ok {
		sc := scan{b: rest}
		if sc.receipt(&fast, &s.same) && sc.next('}') {
			if sc.ws(); sc.i == len(sc.b) {
				a.Receipt = &fast
			}
		}
	}
	if a.Receipt == nil {
		var end api.Error
		if err := json.Unmarshal(line, &end); err == nil && end.Error.Code != "" {
			return &Error{StatusCode: http.StatusOK, Code: end.Error.Code, Message: end.Error.Message, ID: end.Error.ID}
		}
		if err := json.Unmarshal(line, &a); err != nil || (a.Receipt == nil) == (a.Refused == nil) {
			return fmt.Errorf("hourglass client: send stream: unreadable answer %q", line)
		}
	}
	s.mu.Lock()
	if len(s.waiters) == 0 {
		s.mu.Unlock()
		return fmt.Errorf("hourglass client: send stream: an answer with no message sent: %q", line)
	}
	ch := s.waiters[0]
	s.waiters = s.waiters[1:]
	s.mu.Unlock()
	if a.Receipt != nil {
		ch <- sendAnswer{r: *a.Receipt}
	} else {
		ch <- sendAnswer{err: &Error{StatusCode: http.StatusOK, Code: a.Refused.Code, Message: a.Refused.Message, ID: a.Refused.ID}}
	}
	return nil
}

// finish ends the stream with err, the broker's error line or the
// transport's failure (nil: the body ended): the sends not answered fail
// with it, and a later Send too.
func (s *SendStream) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endErr = err
	if err == nil {
		err = errors.New("hourglass client: send stream: the stream ended without answering")
	}
	s.ended = err
	for _, ch := range s.waiters {
		ch <- sendAnswer{err: err}
	}
	s.waiters = nil
}

// Close says no more messages will come, waits for the answers of those
// sent, and ends the stream. It returns the error the broker ended the
// stream with, if any.
func (s *SendStream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.wdone
	<-s.done
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endErr
}
