package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/remoting"
)

// syncBuffer is a log sink several goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// remotingAddr waits for the log line that names the remoting address.
func remotingAddr(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == RemotingListeningMsg {
				return rec.Addr
			}
		}
	}
	t.Fatalf("no %q log line:\n%s", RemotingListeningMsg, logs.String())
	return ""
}

// remotingCall sends one JSON-header remoting request and returns the
// response's code.
func remotingCall(t *testing.T, addr string, code int32, ext map[string]string) int32 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr, _ := json.Marshal(map[string]any{"code": code, "language": "GO", "opaque": 7, "flag": 0, "extFields": ext})
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(hdr))) // serialize type 0: JSON
	if _, err := c.Write(append(frame, hdr...)); err != nil {
		t.Fatal(err)
	}
	var head [8]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		t.Fatal(err)
	}
	n, hl := binary.BigEndian.Uint32(head[:4]), binary.BigEndian.Uint32(head[4:])&0xffffff
	rest := make([]byte, n-4)
	if _, err := io.ReadFull(c, rest); err != nil {
		t.Fatal(err)
	}
	var resp struct{ Code int32 }
	if err := json.Unmarshal(rest[:hl], &resp); err != nil {
		t.Fatalf("response header %q: %v", rest[:hl], err)
	}
	return resp.Code
}

// TestRunFailsWhenOffsetsAreNotDurableAtShutdown: consumer offsets that
// cannot be written at shutdown make Run fail (so `hourglass serve` exits
// non-zero) and log a line that names the cause; a clean exit would tell
// a supervisor that nothing was lost when the group's last commits were.
func TestRunFailsWhenOffsetsAreNotDurableAtShutdown(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.GRPCListen, cfg.RemotingListen = "127.0.0.1:0", "", "127.0.0.1:0"
	cfg.DrainTimeout = 5 * time.Second
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, runErr := startRun(ctx, t, cfg, logger)
	addr := remotingAddr(t, logs)
	resp, err := http.Post(base+"/v1/topics/orders/messages", "application/json", strings.NewReader(`{"body":"x","delay":"1h"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send: %d", resp.StatusCode)
	}
	// A directory where the offsets file's temporary copy goes: every
	// write of the offsets file fails from now on, as on a full or
	// failing disk (even for root, which ignores permissions).
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "remoting", "consumer-offsets.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if code := remotingCall(t, addr, 15, map[string]string{"consumerGroup": "g", "topic": "orders", "queueId": "0", "commitOffset": "1"}); code == 0 {
		t.Fatal("an offset update that could not be written was answered SUCCESS")
	}
	cancel()
	select {
	case err := <-runErr:
		if err == nil || !strings.Contains(err.Error(), "consumer offsets") {
			t.Fatalf("Run returned %v; want an error naming the consumer offsets", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of its context's end")
	}
	if out := logs.String(); !strings.Contains(out, `"level":"ERROR","msg":"remoting: consumer offsets could not be made durable at shutdown"`) {
		t.Errorf("no error line naming the cause:\n%s", out)
	}
}

// TestRemotingMaxConnsFlag: -remoting-max-conns reaches the adapter, its
// 0 meaning no bound (the adapter's own 0 is its default).
func TestRemotingMaxConnsFlag(t *testing.T) {
	for flagValue, want := range map[int]int{0: -1, 1: 1, 10000: 10000} {
		if got := remotingMaxConns(flagValue); got != want {
			t.Errorf("-remoting-max-conns %d: MaxConns %d, want %d", flagValue, got, want)
		}
	}
	if c := DefaultConfig(); c.RemotingMaxConns != remoting.DefaultMaxConns {
		t.Errorf("default -remoting-max-conns %d, want %d", c.RemotingMaxConns, remoting.DefaultMaxConns)
	}
}

// TestRemotingMetricsServed: with remoting on and gRPC off, /metrics
// carries the remoting adapter's series beside the engine's.
func TestRemotingMetricsServed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.GRPCListen, cfg.RemotingListen = "127.0.0.1:0", "", "127.0.0.1:0"
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, runErr := startRun(ctx, t, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	if code := remotingCall(t, remotingAddr(t, logs), 106, nil); code != 0 {
		t.Fatalf("GET_BROKER_CLUSTER_INFO answered %d", code)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`hourglass_remoting_requests_total{code="SUCCESS",request="GET_BROKER_CLUSTER_INFO"} 1`,
		"hourglass_remoting_connections ", "hourglass_messages_sent_total "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
