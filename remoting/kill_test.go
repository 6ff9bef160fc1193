//go:build !race

package remoting

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// HourglassBinary returns the hourglass program for the tests that run it
// as a real process. The external test package (child_test.go) sets it to
// clitest.Binary: this test binary, run as the command line in the
// processes started from it, so no go build is needed. (This package's own
// tests cannot import the command line: it imports this package.)
var HourglassBinary func() (string, error)

// binaryOnce sets the program up once.
var binaryOnce = sync.OnceValues(func() (string, error) { return HourglassBinary() })

type proc struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan struct{}
	addr   string
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProc runs `hourglass serve` on dir with the remoting protocol on a
// free port, and waits until it answers a remoting request.
func startProc(t *testing.T, dir string) *proc {
	t.Helper()
	bin, err := binaryOnce()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{out: &bytes.Buffer{}, exited: make(chan struct{}), addr: freeAddr(t)}
	p.cmd = exec.Command(bin, "serve", "--data-dir", dir, "--listen", freeAddr(t), "--grpc-listen", "",
		"--remoting-listen", p.addr, "--delay-levels", "1s,2s,3s,4s")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.exited })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-p.exited:
			t.Fatalf("hourglass serve exited at start:\n%s", p.out)
		default:
		}
		if nc, err := net.Dial("tcp", p.addr); err == nil {
			resp := exchange(t, nc, &Command{Code: codeGetBrokerClusterInfo})
			nc.Close()
			if resp.Code == respSuccess {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hourglass serve not ready in 20s:\n%s", p.out)
		}
	}
}

// TestClientKill9WithLevelsPending: the official Go client sends level-delayed
// messages to a real broker process, which is killed with SIGKILL while
// they are pending, right after a consumer offset update was answered;
// after a restart on the same directory each message is delivered once,
// none before its level, and the offset is still there.
func TestClientKill9WithLevelsPending(t *testing.T) {
	dir := t.TempDir()
	p1 := startProc(t, dir)
	b1 := &testBroker{addr: p1.addr}
	prod := newProducer(t, b1)
	levels := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}
	due := map[string]time.Time{}
	for i := 0; i < 40; i++ {
		level := 2 + i%3
		m := primitive.NewMessage("payments", []byte(fmt.Sprint("expire ", i))).WithDelayTimeLevel(level)
		sent := time.Now()
		res, err := prod.SendSync(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		due[res.MsgID] = sent.Add(levels[level-1])
	}
	prod.Shutdown()
	update := &Command{Code: codeUpdateConsumerOffset, ExtFields: map[string]string{"consumerGroup": "kept",
		"topic": "payments", "queueId": "2", "commitOffset": "17"}}
	if resp := b1.request(t, update); resp.Code != respSuccess {
		t.Fatalf("offset update: %d %q", resp.Code, resp.Remark)
	}
	p1.cmd.Process.Kill() // SIGKILL
	<-p1.exited

	p2 := startProc(t, dir)
	b2 := &testBroker{addr: p2.addr}
	query := &Command{Code: codeQueryConsumerOffset, ExtFields: map[string]string{"consumerGroup": "kept", "topic": "payments", "queueId": "2"}}
	if resp := b2.request(t, query); resp.Code != respSuccess || resp.ExtFields["offset"] != "17" {
		t.Fatalf("offset after kill -9: %d %v", resp.Code, resp.ExtFields)
	}
	_, got := newPush(t, b2, "expirer", "payments", consumer.MessageSelector{}, nil)
	seen := map[string]bool{}
	for len(seen) < len(due) {
		d := waitFor(t, got, 20*time.Second)
		at, ok := due[d.msg.MsgId]
		if !ok || seen[d.msg.MsgId] {
			t.Fatalf("unexpected or repeated message %s (%q)", d.msg.MsgId, d.msg.Body)
		}
		if early := at.Sub(d.at); early > 0 {
			t.Fatalf("%q delivered %v early", d.msg.Body, early)
		}
		seen[d.msg.MsgId] = true
	}
}
