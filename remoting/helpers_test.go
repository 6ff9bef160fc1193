package remoting

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

func init() { rlog.SetLogLevel("error") }

// testLevels is a short delay-level table, so that retries (level 3 and
// up) come back within seconds.
var testLevels = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond,
	400 * time.Millisecond, 500 * time.Millisecond, 600 * time.Millisecond, 700 * time.Millisecond}

type testBroker struct {
	eng  *engine.Engine
	srv  *Server
	addr string
	dir  string
}

// startTest opens an engine and serves the remoting protocol on a free
// port until the test ends.
func startTest(t testing.TB, edit func(*Options)) *testBroker {
	t.Helper()
	dir := t.TempDir()
	return startAt(t, dir, "127.0.0.1:0", edit)
}

func startAt(t testing.TB, dir, addr string, edit func(*Options)) *testBroker {
	t.Helper()
	return startWrapped(t, dir, addr, edit, nil)
}

// startWrapped is startAt with the listener wrapped (TLS).
func startWrapped(t testing.TB, dir, addr string, edit func(*Options), wrap func(net.Listener) net.Listener) *testBroker {
	t.Helper()
	lim := message.Limits{DelayLevels: testLevels}
	eng, err := engine.Open(engine.Options{Dir: dir + "/engine", Limits: lim, DefaultQueues: 4})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Limits: lim, DefaultQueues: 4, AutoCreateTopics: true, OffsetsDir: dir + "/remoting",
		MaxLongPoll: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if edit != nil {
		edit(&opts)
	}
	srv, err := New(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	go srv.Serve(ln)
	b := &testBroker{eng: eng, srv: srv, addr: ln.Addr().String(), dir: dir}
	t.Cleanup(func() { b.close(t) })
	return b
}

func (b *testBroker) close(t testing.TB) {
	if b.srv == nil {
		return
	}
	if err := b.srv.Close(); err != nil {
		t.Error(err)
	}
	if err := b.eng.Close(); err != nil {
		t.Error(err)
	}
	b.srv = nil
}

var instances atomic.Int64

// instance is a client instance name of its own: the Go client shares one
// client per instance name within a process, and a broadcasting consumer
// keeps its offsets in a file named after it, which an earlier run's
// consumer of the same name would have left behind.
func instance(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano(), instances.Add(1))
}

// request sends one request on a new connection and reads its answer.
func (b *testBroker) request(t *testing.T, c *Command) *Command {
	t.Helper()
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	return exchange(t, nc, c)
}

func exchange(t *testing.T, nc net.Conn, c *Command) *Command {
	t.Helper()
	c.Opaque = 42
	out, err := c.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		buf, err := readFrame(nc, testLimits)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := decodeFrame(buf, testLimits)
		if err != nil {
			t.Fatal(err)
		}
		if resp.isResponse() && resp.Opaque == 42 {
			return resp
		}
	}
}

// queueHolding waits until one of the 4 queues of topic holds n entries
// and returns it; it fails the test after 10 s.
func queueHolding(t *testing.T, eng *engine.Engine, srv *Server, topic string, n uint64) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		signal := eng.VisibleSignal()
		for i := 0; i < 4; i++ {
			if srv.queueLen(topic, i) == n {
				return i
			}
		}
		select {
		case <-signal:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("no queue of %s came to hold %d visible messages", topic, n)
		}
	}
}
