package remoting

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestHeldPullIgnoresOtherQueuesFires: the engine's visible signal is
// one for every queue, so a fire into another topic wakes a held pull.
// That pull finds its queue as long as before and waits again, without
// waiting for the log's fdatasync under way (durableLen), which hands out
// nothing new to it. Here that fdatasync (the fire's) is held until the
// pull has answered, at its deadline, with the not-found answer and the
// max offset its first read made durable; a pull that waited for the
// fdatasync could not answer before it is let go.
func TestHeldPullIgnoresOtherQueuesFires(t *testing.T) {
	ff := &gatedFS{FS: vfs.NewMem(), gate: make(chan struct{}), held: make(chan struct{})}
	lim := message.Limits{DelayLevels: testLevels}
	eng, err := engine.Open(engine.Options{Dir: "engine", FS: ff, Limits: lim, DefaultQueues: 4,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(eng, Options{Limits: lim, DefaultQueues: 4, AutoCreateTopics: true, OffsetsDir: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	var release sync.Once
	let := func() { release.Do(func() { close(ff.gate) }) }
	t.Cleanup(func() {
		let()
		srv.Close()
		eng.Close()
	})
	if err := eng.CreateTopic("quiet", engine.TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Send(context.Background(), message.Message{Topic: "busy", Body: []byte("a")},
		message.When{Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// From here the log's fdatasyncs (the fire's first) wait for the
	// gate. The pull's first read, well before the fire a second after
	// the send, finds the log idle and durable: it needs none.
	first := exchange(t, nc, &Command{Code: codeGetMaxOffset, ExtFields: map[string]string{"topic": "quiet", "queueId": "0"}})
	if first.Code != respSuccess || first.ExtFields["offset"] != "0" {
		t.Fatalf("max offset of the quiet queue: code %d, offset %q", first.Code, first.ExtFields["offset"])
	}
	ff.on.Store(true)
	pull := &Command{Code: codePullMessage, Opaque: 7, ExtFields: map[string]string{"consumerGroup": "g",
		"topic": "quiet", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "2", "suspendTimeoutMillis": "2500"}}
	out, err := pull.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	answered := make(chan *Command, 1)
	go func() { // the answer, or nil when the connection fails
		defer close(answered)
		nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		if buf, err := readFrame(nc, testLimits); err == nil {
			if resp, err := decodeFrame(buf, testLimits); err == nil {
				answered <- resp
			}
		}
	}()
	select {
	case <-ff.held: // the fire was written, made visible, and its fdatasync is held
	case <-time.After(10 * time.Second):
		t.Fatal("the delayed message never fired")
	}
	q := queueHolding(t, eng, srv, "busy", 1) // visible: the held pull was signalled
	select {
	case resp := <-answered:
		if resp == nil {
			t.Fatal("the connection failed before the held pull answered")
		}
		if resp.Code != respPullNotFound || resp.ExtFields["maxOffset"] != "0" || len(resp.Body) != 0 {
			t.Fatalf("held pull: code %d, maxOffset %q, %d body bytes; want PULL_NOT_FOUND, 0, none",
				resp.Code, resp.ExtFields["maxOffset"], len(resp.Body))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the held pull on another topic did not answer at its deadline while the fire into queue %d of busy waited for its fdatasync", q)
	}
	let()
	// The fire's own queue is still handed out once durable.
	resp := exchange(t, nc, &Command{Code: codePullMessage, ExtFields: map[string]string{"consumerGroup": "g",
		"topic": "busy", "queueId": string(rune('0' + q)), "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0"}})
	if resp.Code != respSuccess || len(resp.Body) == 0 {
		t.Fatalf("pull of the fired message: code %d %q", resp.Code, resp.Remark)
	}
}

// gatedFS holds the commit log's fdatasyncs, once on, until gate closes,
// and closes held when the first one begins. Only Sync waits: the fire's
// write, and the queue index it then appends to, go on.
type gatedFS struct {
	vfs.FS
	on         atomic.Bool
	gate, held chan struct{}
	once       sync.Once
}

func (g *gatedFS) Create(name string) (vfs.File, error) {
	f, err := g.FS.Create(name)
	return g.wrap(name, f, err)
}
func (g *gatedFS) Open(name string) (vfs.File, error) {
	f, err := g.FS.Open(name)
	return g.wrap(name, f, err)
}

func (g *gatedFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, fs: g, log: strings.HasSuffix(name, ".log")}, nil
}

type gatedFile struct {
	vfs.File
	fs  *gatedFS
	log bool
}

func (f *gatedFile) Sync() error {
	if f.log && f.fs.on.Load() {
		f.fs.once.Do(func() { close(f.fs.held) })
		<-f.fs.gate
	}
	return f.File.Sync()
}
