package remoting

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first accepts with err.
type failingListener struct {
	net.Listener
	fails atomic.Int32
	err   error
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// TestAcceptOutOfDescriptors: the process out of file descriptors (a
// client holding thousands of connections) fails accepts for a while; the
// service waits and accepts again, with a log line, rather than end (and
// the broker with it). An error that is not transient still ends Serve.
func TestAcceptOutOfDescriptors(t *testing.T) {
	logs := &syncBuffer{}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	var fl *failingListener
	b := startWrapped(t, t.TempDir(), "127.0.0.1:0", func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) },
		func(ln net.Listener) net.Listener {
			fl = &failingListener{Listener: ln, err: emfile}
			fl.fails.Store(5)
			return fl
		})
	if resp := b.request(t, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("after failed accepts: %d %q", resp.Code, resp.Remark)
	}
	if fl.fails.Load() >= 0 {
		t.Fatal("the listener's failures were not met")
	}
	if n := strings.Count(logs.String(), "accepting a connection failed"); n != 1 {
		t.Fatalf("%d log lines for a run of 5 failed accepts, want 1:\n%s", n, logs)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("listener broken")
	bad := &failingListener{Listener: ln, err: boom}
	bad.fails.Store(1)
	done := make(chan error, 1)
	go func() { done <- b.srv.Serve(bad) }()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("Serve ended with %v, want %v", err, boom)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve went on after a listener error that is not transient")
	}
}

// TestConnectionLimit: past MaxConns a new connection is closed at once
// with a log line, unanswered, while those open are served; once one
// closes, a new one is served again.
func TestConnectionLimit(t *testing.T) {
	logs := &syncBuffer{}
	b := startTest(t, func(o *Options) {
		o.MaxConns = 3
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	var open []net.Conn
	defer func() {
		for _, nc := range open {
			nc.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, nc)
		if resp := exchange(t, nc, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
			t.Fatalf("connection %d: %d %q", i, resp.Code, resp.Remark)
		}
	}
	extra, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	out, _ := (&Command{Code: codeGetBrokerClusterInfo, Opaque: 42}).encode()
	extra.Write(out)
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(extra); len(got) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("a connection past the limit: %d bytes, %v; want it closed unanswered", len(got), err)
	}
	if !strings.Contains(logs.String(), "refusing a connection") {
		t.Fatalf("no log line for the refused connection:\n%s", logs)
	}
	if resp := exchange(t, open[0], &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("an open connection after the refusal: %d %q", resp.Code, resp.Remark)
	}
	open[2].Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b.srv.mu.Lock()
		n := len(b.srv.conns)
		b.srv.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections held after one of 3 closed", n)
		}
	}
	if resp := b.request(t, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("a new connection below the limit again: %d %q", resp.Code, resp.Remark)
	}
}
