package remoting

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestPullWhenSyncFailsAnswersSystemError (engine invariant E21): a fire
// record's fdatasync fails after the fire made its message visible, so
// the queue holds an entry a power loss takes back. A pull then meets the
// failure in durableLen (Engine.Sync): it is answered SYSTEM_ERROR with a
// remark saying why, as RocketMQ answers a pull its store cannot serve,
// and hands out no offset (no message, no nextBeginOffset, no
// maxOffset) at or past that entry; the connection stays open and
// answers the next request.
func TestPullWhenSyncFailsAnswersSystemError(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
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
	t.Cleanup(func() {
		srv.Close()
		eng.Close() // stopped by the failure: its error is the failure's
	})

	if _, err := eng.Send(context.Background(), message.Message{Topic: "d", Body: []byte("a")}, message.When{Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ff.Inject(func(op vfs.Op, name string) error { // every fdatasync of the log from now: the fire's
		if op == vfs.OpSync && strings.HasSuffix(name, ".log") {
			return syscall.EIO
		}
		return nil
	})
	q := queueHolding(t, eng, srv, "d", 1)

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pull := &Command{Code: codePullMessage, ExtFields: map[string]string{"consumerGroup": "g", "topic": "d",
		"queueId": strconv.Itoa(q), "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0"}}
	resp := exchange(t, nc, pull)
	if resp.Code != respSystemError || !strings.Contains(resp.Remark, "sync") || len(resp.Body) != 0 {
		t.Fatalf("pull after the fire's fdatasync failed: code %d %q, %d body bytes; want SYSTEM_ERROR (%d) saying why, nothing handed out",
			resp.Code, resp.Remark, len(resp.Body), respSystemError)
	}
	for _, f := range []string{"nextBeginOffset", "maxOffset"} {
		if v, ok := resp.ExtFields[f]; ok && v != "0" {
			t.Errorf("the error answer hands out %s %s, past the durable length 0", f, v)
		}
	}
	// The same connection answers the next requests: the max offset
	// meets the same failure, the min offset needs no sync.
	queue := map[string]string{"topic": "d", "queueId": strconv.Itoa(q)}
	if resp := exchange(t, nc, &Command{Code: codeGetMaxOffset, ExtFields: queue}); resp.Code != respSystemError || resp.ExtFields["offset"] != "" {
		t.Fatalf("max offset after the failure: code %d, offset %q; want SYSTEM_ERROR and none", resp.Code, resp.ExtFields["offset"])
	}
	if resp := exchange(t, nc, &Command{Code: codeGetMinOffset, ExtFields: queue}); resp.Code != respSuccess {
		t.Fatalf("the min offset on the same connection: code %d %q", resp.Code, resp.Remark)
	}
}
