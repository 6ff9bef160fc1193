package sdnotify

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// listen opens a unixgram socket at name, as systemd does.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func read(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 4096)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}

func TestNotifyPathSocket(t *testing.T) {
	name := filepath.Join(t.TempDir(), "notify")
	c := listen(t, name)
	for _, state := range []string{Ready, Stopping} {
		if sent, err := Notify(name, state); !sent || err != nil {
			t.Fatalf("notify %s: %v %v", state, sent, err)
		}
		if got := read(t, c); got != state {
			t.Fatalf("received %q, want %q", got, state)
		}
	}
}

func TestNotifyAbstractSocket(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("abstract unix sockets are a Linux feature")
	}
	var b [8]byte
	rand.Read(b[:])
	name := "@hourglass-sdnotify-test-" + hex.EncodeToString(b[:])
	c := listen(t, name)
	if sent, err := Notify(name, Ready); !sent || err != nil {
		t.Fatalf("notify: %v %v", sent, err)
	}
	if got := read(t, c); got != Ready {
		t.Fatalf("received %q", got)
	}
}

func TestNotifyWithoutSocket(t *testing.T) {
	if sent, err := Notify("", Ready); sent || err != nil {
		t.Fatalf("no socket: %v %v, want nothing sent and no error", sent, err)
	}
	if _, err := Notify("relative/name", Ready); err == nil {
		t.Fatal("a relative socket name was accepted")
	}
	if _, err := Notify(filepath.Join(t.TempDir(), "missing"), Ready); err == nil {
		t.Fatal("a missing socket was accepted")
	}
}
