package remoting

import (
	"errors"
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
