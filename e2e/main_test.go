// Package e2e_test runs the real hourglass binary and drives it over HTTP
// with net/http only, as a user would: delayed delivery on time, cancel,
// reschedule, leases, dead letters, FIFO order, every bad input of the API
// contract, and restarts (SIGTERM and kill -9) that must lose nothing
// acknowledged.
package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the hourglass executable built once by TestMain.
var binary string

// The version, commit and build date TestMain's build stamps into the
// binary, as make build does with git's.
const (
	stampVersion = "v9.8.7"
	stampCommit  = "0123456789abcdef"
	stampDate    = "2026-11-30T10:00:00Z"
	stampPkg     = "github.com/hourglass-mq/hourglass/internal/buildinfo"
	stampFlags   = "-X " + stampPkg + ".Version=" + stampVersion + " -X " + stampPkg + ".Commit=" + stampCommit + " -X " + stampPkg + ".Date=" + stampDate
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hourglass-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "hourglass")
	// Stamped as make build stamps it (the linker's -X), once for every
	// test: version_test.go checks what the stamps become.
	args := []string{"build", "-ldflags", stampFlags, "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/hourglass")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the hourglass binary failed:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running hourglass serve process.
type server struct {
	t       *testing.T
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:port
	dataDir string
	args    []string
	env     []string
	token   string
	client  *http.Client
	logs    *syncBuffer
	exited  chan struct{}
	exitErr error
}

// syncBuffer collects the process's output for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer runs hourglass serve on dataDir (a new temporary directory
// if empty) and waits until /healthz answers. env entries are KEY=VALUE.
func startServer(t *testing.T, dataDir string, env []string, args ...string) *server {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	s := &server{t: t, dataDir: dataDir, args: args, env: env,
		client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOURGLASS_AUTH_TOKEN="); ok {
			s.token = v
		}
	}
	s.start()
	t.Cleanup(func() {
		s.client.CloseIdleConnections()
		select {
		case <-s.exited:
			return
		default:
		}
		s.cmd.Process.Kill()
		<-s.exited
	})
	return s
}

// listeningLine is what serve prints once its HTTP listener is up.
var listeningLine = regexp.MustCompile(`(?m)^listening on (http://\S+)$`)

func (s *server) start() {
	t := s.t
	t.Helper()
	// Port 0: the process binds a free port itself and prints it. A port
	// found free here and handed over could be taken by another test's
	// listener before the process binds it.
	s.base = ""
	args := append([]string{"serve", "--data-dir", s.dataDir, "--listen", "127.0.0.1:0"}, s.args...)
	s.cmd = exec.Command(binary, args...)
	s.cmd.Env = append(os.Environ(), s.env...)
	s.logs = &syncBuffer{}
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan struct{})
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-s.exited:
			t.Fatalf("hourglass serve exited at start (%v); output:\n%s", s.exitErr, s.logs)
		default:
		}
		if s.base == "" {
			if m := listeningLine.FindStringSubmatch(s.logs.String()); m != nil {
				s.base = m[1]
			}
		}
		if s.base != "" {
			resp, err := s.client.Get(s.base + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hourglass serve did not answer /healthz within 20s; output:\n%s", s.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends sig and waits for the process to exit, returning its exit
// error (nil for status 0).
func (s *server) stop(sig syscall.Signal) error {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		s.t.Fatalf("hourglass serve did not exit within 30s of %v; output:\n%s", sig, s.logs)
	}
	s.client.CloseIdleConnections()
	return s.exitErr
}

// restart stops the server with sig and starts it again on the same data
// directory (and a new port).
func (s *server) restart(sig syscall.Signal) {
	s.t.Helper()
	err := s.stop(sig)
	if sig == syscall.SIGTERM && err != nil {
		s.t.Fatalf("hourglass serve exited with %v after SIGTERM; output:\n%s", err, s.logs)
	}
	s.start()
}

// reply is an HTTP answer.
type reply struct {
	status int
	body   []byte
	header http.Header
}

// errorCode returns the code of an error body.
func (r reply) errorCode() string {
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// do sends a request; body is sent as is if it is a string, as JSON
// otherwise (nil: none). Transport errors are returned.
func (s *server) try(method, path string, body any, header ...string) (reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return reply{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, body: data, header: resp.Header}, nil
}

// do is try that fails the test on a transport error. Call it only from
// the test goroutine.
func (s *server) do(method, path string, body any, header ...string) reply {
	s.t.Helper()
	r, err := s.try(method, path, body, header...)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// call requires status want and decodes the answer into out (if not nil).
func (s *server) call(method, path string, body any, want int, out any) {
	s.t.Helper()
	r := s.do(method, path, body)
	if r.status != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			s.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
}

// wantError requires an error reply with status and code.
func wantError(t *testing.T, r reply, status int, code string) {
	t.Helper()
	if r.status != status || r.errorCode() != code {
		t.Fatalf("got %d %s; want %d with code %s", r.status, r.body, status, code)
	}
}

// The JSON shapes the tests read (a subset of the API's).

type receipt struct {
	ID      string `json:"id"`
	Topic   string `json:"topic"`
	Queue   int    `json:"queue"`
	Due     int64  `json:"due"`
	DueTime string `json:"due_time"`
}

type received struct {
	ID         string            `json:"id"`
	Receipt    string            `json:"receipt"`
	Attempt    int               `json:"attempt"`
	Key        string            `json:"key"`
	Group      string            `json:"group"`
	Body       *string           `json:"body"`
	Properties map[string]string `json:"properties"`
	Due        int64             `json:"due"`
	Visible    int64             `json:"visible"`
}

type info struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Due   int64  `json:"due"`
}

type groupInfo struct {
	Name            string `json:"name"`
	Backlog         int64  `json:"backlog"`
	InFlight        int64  `json:"in_flight"`
	Delivered       uint64 `json:"delivered"`
	Acked           uint64 `json:"acked"`
	Redelivered     uint64 `json:"redelivered"`
	DeadLettered    uint64 `json:"dead_lettered"`
	DeadLetterTopic string `json:"dead_letter_topic"`
}

// receive leases messages for group, long-polling up to wait.
func (s *server) receive(topic, group string, req map[string]any) []received {
	s.t.Helper()
	var out struct {
		Messages []received `json:"messages"`
	}
	var body any // no options: no body (a JSON null is refused)
	if req != nil {
		body = req
	}
	s.call("POST", "/v1/topics/"+topic+"/groups/"+group+"/receive", body, http.StatusOK, &out)
	return out.Messages
}

func (s *server) ack(topic, group string, ms ...received) {
	s.t.Helper()
	if len(ms) == 0 {
		return
	}
	rs := make([]string, len(ms))
	for i, m := range ms {
		rs[i] = m.Receipt
	}
	s.call("POST", "/v1/topics/"+topic+"/groups/"+group+"/ack", map[string]any{"receipts": rs}, http.StatusOK, nil)
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func nowMs() int64 { return time.Now().UnixMilli() }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// pathEscape escapes a path segment ('%' and '/' included).
func pathEscape(s string) string { return url.PathEscape(s) }
