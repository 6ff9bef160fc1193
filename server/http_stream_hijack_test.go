package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// closeConn after a line written without a flush (a batch with more of
// its lease ahead): Hijack drops the response writer's buffer, then the
// last chunk makes the response look whole.
func TestStreamEarlyEndWritesItsBufferedLines(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		rc.EnableFullDuplex()
		o := &lineWriter{w: w, rc: rc, chunked: true}
		o.write([]byte("line 1\n"), true)
		o.write([]byte("line 2, a batch with more ahead\n"), false)
		o.closeConn()
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "line 2") {
		t.Fatalf("the response ended cleanly (err %v) with %q: line 2 was dropped", err, b)
	}
}
