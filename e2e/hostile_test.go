package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostileClientOverTheWire runs the real binary with short connection
// timeouts (one from a flag, one from the environment) and checks that
// input the decoder or the router would rewrite is refused, that a body
// sent slowly is cut off, and that nothing refused survives a restart.
func TestHostileClientOverTheWire(t *testing.T) {
	const timeout = 500 * time.Millisecond
	s := startServer(t, "", []string{"HOURGLASS_READ_TIMEOUT=" + timeout.String()}, "--read-header-timeout", timeout.String())
	s.call("PUT", "/v1/topics/t", nil, http.StatusCreated, nil)

	for _, c := range []struct{ method, path, body, inMessage string }{
		{"POST", "/v1/topics/t/messages", "{\"key\":\"k\xff\",\"body\":\"x\"}", `field \"key\" is not valid UTF-8`},
		{"POST", "/v1/topics/t/messages", `{"properties":{"p":"\udfff"}}`, "lone UTF-16 surrogate"},
		{"POST", "/v1/topics/t/messages", `{"key":"a","key":"b"}`, "more than once"},
		{"POST", "/v1/topics/%2e%2e/messages", `{"body":"x"}`, "reserved"},
		{"PUT", "/v1/topics/%2E", ``, "reserved"},
		{"POST", "/v1/topics/t/messages", `{"at":9223372036854775807}`, "is beyond the maximum delay"},
	} {
		r := s.do(c.method, c.path, c.body)
		wantError(t, r, http.StatusBadRequest, "invalid_argument")
		if !strings.Contains(string(r.body), c.inMessage) {
			t.Errorf("%s %s: answer %s does not mention %s", c.method, c.path, r.body, c.inMessage)
		}
	}

	// The server's read timeout counts from when it begins to read the
	// connection, which can be before Dial returns here: a start taken
	// before the dial is surely no later than the server's.
	start := time.Now()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"body\":\"")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := conn.Write([]byte("y")); err != nil {
					return
				}
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a slow body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if took := time.Since(start); resp.StatusCode != http.StatusBadRequest || took < timeout || took > timeout+10*time.Second {
		t.Fatalf("slow body: %d %s after %v; want 400 after the read timeout %v", resp.StatusCode, body, took, timeout)
	}

	s.restart(syscall.SIGTERM)
	var list struct {
		Topics []struct{ Name string }
	}
	s.call("GET", "/v1/topics", nil, http.StatusOK, &list)
	if len(list.Topics) != 1 || list.Topics[0].Name != "t" {
		t.Fatalf("topics after restart: %+v; want only t", list.Topics)
	}
	var topic struct {
		Pending int64
	}
	s.call("GET", "/v1/topics/t", nil, http.StatusOK, &topic)
	if topic.Pending != 0 {
		t.Fatalf("%d refused messages are pending after restart", topic.Pending)
	}
}
