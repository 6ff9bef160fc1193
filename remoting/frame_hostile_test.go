package remoting

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawFrame is a frame with the given length field, serialize type and
// header length word, then the bytes.
func rawFrame(length int32, typ byte, hlen uint32, rest []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(length))
	b = binary.BigEndian.AppendUint32(b, uint32(typ)<<24|hlen&0xFFFFFF)
	return append(b, rest...)
}

// TestHostileFramesOverTCP: binary headers with bogus lengths, negative
// and zero lengths, an empty header, too many or too large extFields and
// a body shorter than its length each close the connection (with a log
// line) or get an error response, within the read timeout; the broker
// goes on serving.
func TestHostileFramesOverTCP(t *testing.T) {
	b, logs := startLogged(t, func(o *Options) { o.ReadTimeout = 500 * time.Millisecond })
	bin := func(remarkLen, extLen int32, ext []byte) []byte {
		h := []byte{0, 10, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0}
		h = binary.BigEndian.AppendUint32(h, uint32(remarkLen))
		h = binary.BigEndian.AppendUint32(h, uint32(extLen))
		return append(h, ext...)
	}
	withLen := func(typ byte, h []byte) []byte { return rawFrame(int32(4+len(h)), typ, uint32(len(h)), h) }
	many := map[string]string{}
	for i := 0; i < 1000; i++ {
		many["k"+strconv.Itoa(i)] = "v"
	}
	manyJSON, _ := json.Marshal(map[string]any{"code": 10, "extFields": many})
	hugeJSON, _ := json.Marshal(map[string]any{"code": 10, "extFields": map[string]string{"k": strings.Repeat("v", 2<<20)}})
	cases := map[string][]byte{
		"negative length":          binary.BigEndian.AppendUint32(nil, 0x80000000),
		"length -1":                binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF),
		"length 0":                 binary.BigEndian.AppendUint32(nil, 0),
		"zero-length JSON header":  rawFrame(4, 0, 0, nil),
		"zero-length binary":       rawFrame(4, 1, 0, nil),
		"binary remark negative":   withLen(1, bin(-1, 0, nil)),
		"binary remark too long":   withLen(1, bin(1<<30, 0, nil)),
		"binary ext negative":      withLen(1, bin(0, -7, nil)),
		"binary ext past header":   withLen(1, bin(0, 100, []byte{0, 1})),
		"binary key past ext":      withLen(1, bin(0, 4, []byte{0xFF, 0xFF, 'k', 'v'})),
		"binary value negative":    withLen(1, bin(0, 7, []byte{0, 1, 'k', 0xFF, 0xFF, 0xFF, 0xFF})),
		"binary header truncated":  withLen(1, []byte{0, 10, 0}),
		"header length past frame": rawFrame(8, 0, 1<<20, []byte("{}xx")),
		"too many extFields":       withLen(0, manyJSON),
		"huge extFields":           withLen(0, hugeJSON),
		"body shorter (EOF)":       rawFrame(100, 0, 2, []byte("{}")),
	}
	for name, in := range cases {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(in)
		if strings.Contains(name, "EOF") {
			nc.(*net.TCPConn).CloseWrite()
		}
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		rest, err := io.ReadAll(nc)
		nc.Close()
		if err != nil {
			t.Errorf("%s: neither closed nor answered: %v", name, err)
			continue
		}
		if len(rest) > 0 {
			buf, err := readFrame(strings.NewReader(string(rest)), Limits{MaxFrame: 1 << 30, MaxHeader: 1 << 24, MaxExtFields: 64})
			if err != nil {
				t.Errorf("%s: answered %d bytes that are not a frame: %v", name, len(rest), err)
				continue
			}
			if resp, err := decodeFrame(buf, testLimits); err != nil || resp.Code == respSuccess || resp.Remark == "" {
				t.Errorf("%s: answered %+v (%v), want an error with a reason", name, resp, err)
			}
		}
	}
	if resp := b.request(t, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("after hostile frames: %d", resp.Code)
	}
	if n := strings.Count(logs.String(), "malformed frame") + strings.Count(logs.String(), "ended inside a frame"); n < len(cases)-1 {
		t.Fatalf("%d log lines for %d hostile frames:\n%s", n, len(cases), logs)
	}
}

// TestSilentConnectionClosed: a connection that sends nothing is closed
// after the idle timeout, with a log line.
func TestSilentConnectionClosed(t *testing.T) {
	b, logs := startLogged(t, func(o *Options) { o.IdleTimeout = 300 * time.Millisecond })
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if rest, err := io.ReadAll(nc); err != nil || len(rest) != 0 {
		t.Fatalf("a silent connection was not closed: %d bytes, %v", len(rest), err)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "idle"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line:\n%s", logs)
		}
	}
}

// TestThousandsOfConnections: 2,000 connections at once are each served,
// and each one's end releases it.
func TestThousandsOfConnections(t *testing.T) {
	b := startTest(t, nil)
	const n = 2000
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for i := 0; i < n; i++ {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, nc)
	}
	for i, nc := range conns {
		if resp := exchange(t, nc, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
			t.Fatalf("connection %d: %d %q", i, resp.Code, resp.Remark)
		}
	}
	live := func() int {
		b.srv.mu.Lock()
		defer b.srv.mu.Unlock()
		return len(b.srv.conns)
	}
	if got := live(); got != n {
		t.Fatalf("%d connections held, want %d", got, n)
	}
	for _, nc := range conns {
		nc.Close()
	}
	conns = nil
	for deadline := time.Now().Add(10 * time.Second); live() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still held after their clients closed them", live())
		}
	}
}
