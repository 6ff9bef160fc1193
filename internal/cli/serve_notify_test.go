package cli

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeNotifiesSystemd: with $NOTIFY_SOCKET set, serve sends READY=1
// once its listener answers, and STOPPING=1 when it is told to stop.
func TestServeNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	read := func() string {
		ln.SetReadDeadline(time.Now().Add(30 * time.Second))
		b := make([]byte, 512)
		n, err := ln.Read(b)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(b[:n])
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	env := map[string]string{"HOURGLASS_LOG_LEVEL": "warn", "NOTIFY_SOCKET": sock}
	app := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Now: time.Now,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	done := make(chan int, 1)
	go func() {
		done <- app.Run(ctx, []string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--drain-timeout", "2s"})
	}()
	if got := read(); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	// Ready means the listener is up: it answers at once.
	url, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "listening on ")
	if !ok {
		t.Fatalf("READY=1 before the listening line: %q", out.String())
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz right after READY=1: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if got := read(); got != "STOPPING=1" {
		t.Fatalf("notification at shutdown %q, want STOPPING=1", got)
	}
	if code := <-done; code != ExitOK {
		t.Fatalf("serve exited %d: %s", code, errb.String())
	}
}
