package rocketmq_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	hgbroker "github.com/hourglass-mq/hourglass/broker"
	"github.com/hourglass-mq/hourglass/internal/clitest"
)

// binaryOnce returns the hourglass program for the tests that run it as a
// real process: this test binary, which TestMain turns into the command
// line in the processes started from it (package clitest), so no go build
// is needed.
var binaryOnce = sync.OnceValues(clitest.Binary)

// proc is a running `hourglass serve` process with plaintext gRPC.
type proc struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
	broker broker
}

// lockedBuffer holds a process's output: exec's copying goroutine writes
// it while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The lines serve writes once its HTTP listener and its gRPC service are
// up, with the addresses they bound.
var (
	httpListening = regexp.MustCompile(`(?m)^listening on http://(\S+)$`)
	grpcListening = regexp.MustCompile(`msg="` + regexp.QuoteMeta(hgbroker.GRPCListeningMsg) + `" addr=(\S+)`)
)

// startProc runs the real binary on dir, with extra flags, and waits until
// /healthz answers and the gRPC port accepts connections. The process
// binds free ports itself (port 0) and the test reads them from its
// output: a port found free here and handed over could be taken by a
// parallel test's listener before the process binds it.
func startProc(t *testing.T, dir string, extra ...string) *proc {
	t.Helper()
	bin, err := binaryOnce()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{out: &lockedBuffer{}, exited: make(chan struct{}), broker: broker{dataDir: dir}}
	p.cmd = exec.Command(bin, append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--grpc-listen", "127.0.0.1:0", "--grpc-plaintext"}, extra...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.exited })
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Fatalf("hourglass serve exited at start:\n%s", p.out)
		default:
		}
		out := p.out.String()
		if m := httpListening.FindStringSubmatch(out); m != nil {
			p.broker.http = m[1]
		}
		if m := grpcListening.FindStringSubmatch(out); m != nil {
			p.broker.grpc = m[1]
		}
		if p.broker.http != "" && p.broker.grpc != "" {
			resp, err := http.Get("http://" + p.broker.http + "/healthz")
			if err == nil {
				resp.Body.Close()
				if c, err := net.Dial("tcp", p.broker.grpc); err == nil {
					c.Close()
					if resp.StatusCode == http.StatusOK {
						return p
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hourglass serve not ready in 20s:\n%s", p.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKill9WithDelayedPending: the official client sends delayed messages
// to a real broker process, which is killed with SIGKILL while they are
// pending; after a restart on the same directory each is delivered exactly
// once, none before its delivery timestamp, and a recalled one never.
func TestKill9WithDelayedPending(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p1 := startProc(t, dir)
	prod, err := rmq.NewProducer(&rmq.Config{Endpoint: p1.broker.grpc, Credentials: creds()}, rmq.WithTopics("orders"))
	if err != nil {
		t.Fatal(err)
	}
	startBounded(t, prod.Start)
	due := time.Now().Add(3 * time.Second)
	want := map[string]time.Time{}
	var recalled string
	for i := 0; i < 20; i++ {
		msg := &rmq.Message{Topic: "orders", Body: []byte(fmt.Sprintf("close order %d", i))}
		at := due.Add(time.Duration(i) * 50 * time.Millisecond)
		msg.SetDelayTimestamp(at)
		rs, err := prod.Send(context.Background(), msg)
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			if _, err := prod.Recall(context.Background(), "orders", rs[0].RecallHandle); err != nil {
				t.Fatalf("recall: %v", err)
			}
			recalled = rs[0].MessageID
			continue
		}
		want[rs[0].MessageID] = at
	}
	prod.GracefulStop()

	p1.cmd.Process.Kill() // SIGKILL
	<-p1.exited
	if time.Now().After(due) {
		t.Fatalf("the broker was killed only after the first due time: the test proves nothing")
	}

	p2 := startProc(t, dir)
	c := newConsumer(t, p2.broker, "closers", "orders", time.Second)
	got := map[string]int{}
	receiveUntil(t, c, 20*time.Second, time.Minute, true, func(mv *rmq.MessageView, at time.Time) bool {
		id := mv.GetMessageId()
		got[id]++
		if id == recalled {
			t.Errorf("the recalled message %s was delivered", id)
		}
		if w, ok := want[id]; ok && at.Before(w) {
			t.Errorf("message %s delivered %v early", id, w.Sub(at))
		}
		return len(got) >= len(want)
	})
	// Everything was acked: one more long poll must bring nothing again.
	mvs, err := c.Receive(context.Background(), 32, time.Minute)
	if err != nil && rpcCode(err) != int32(pb.Code_MESSAGE_NOT_FOUND) {
		t.Fatal(err)
	}
	for _, mv := range mvs {
		got[mv.GetMessageId()]++
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("message %s delivered %d times, want once", id, got[id])
		}
	}
	for id, n := range got {
		if _, ok := want[id]; !ok && id != recalled {
			t.Errorf("unknown message %s delivered %d times", id, n)
		}
	}
}
