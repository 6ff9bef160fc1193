package remoting

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log sink tests read while the server writes.
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

func startLogged(t *testing.T, edit func(*Options)) (*testBroker, *syncBuffer) {
	logs := &syncBuffer{}
	b := startTest(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		if edit != nil {
			edit(o)
		}
	})
	return b, logs
}

// TestUnknownCodeAnswered: a request code hourglass does not serve gets
// REQUEST_CODE_NOT_SUPPORTED on a connection that stays usable, in the
// encoding it came in, and one log line per code however often it comes.
func TestUnknownCodeAnswered(t *testing.T) {
	b, logs := startLogged(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := 0; i < 3; i++ {
		for _, typ := range []byte{serializeJSON, serializeRocketMQ} {
			resp := exchange(t, nc, &Command{Code: 9999, Serialize: typ})
			if resp.Code != respRequestCodeNotSupp || !strings.Contains(resp.Remark, "9999") || resp.Serialize != typ {
				t.Fatalf("got %d %q (type %d)", resp.Code, resp.Remark, resp.Serialize)
			}
		}
	}
	// The connection still serves.
	if resp := exchange(t, nc, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("cluster info after unknown codes: %d %q", resp.Code, resp.Remark)
	}
	if n := strings.Count(logs.String(), "request code not supported"); n != 1 {
		t.Fatalf("%d log lines for one unknown code, want 1:\n%s", n, logs)
	}
}

// TestMalformedFramesCloseWithLog: a frame over the limit, a header that
// is not JSON, a header length past the frame, or an unknown serialize
// type closes the connection with a log line; the broker goes on serving.
func TestMalformedFramesCloseWithLog(t *testing.T) {
	b, logs := startLogged(t, func(o *Options) { o.MaxFrame = 1 << 20 })
	frame := func(typ byte, header []byte) []byte {
		f := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
		f = binary.BigEndian.AppendUint32(f, uint32(typ)<<24|uint32(len(header)))
		return append(f, header...)
	}
	cases := map[string][]byte{
		"length over the limit": binary.BigEndian.AppendUint32(nil, 64<<20),
		"header not JSON":       frame(0, []byte("{{{")),
		"header length":         append(binary.BigEndian.AppendUint32(nil, 6), 0, 0, 1, 0, 'x', 'y'),
		"serialize type":        frame(9, []byte("{}")),
	}
	for name, in := range cases {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(in)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(nc); err != nil {
			t.Fatalf("%s: the connection was not closed: %v", name, err)
		}
		nc.Close()
	}
	if n := strings.Count(logs.String(), "malformed frame"); n < len(cases) {
		t.Fatalf("%d log lines for %d malformed frames:\n%s", n, len(cases), logs)
	}
	if resp := b.request(t, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("after malformed frames: %d", resp.Code)
	}
}

// TestSlowClientCutOff: a client that starts a frame and does not finish
// it within the read timeout is disconnected with a log line.
func TestSlowClientCutOff(t *testing.T) {
	b, logs := startLogged(t, func(o *Options) { o.ReadTimeout = 300 * time.Millisecond })
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte{0, 0, 1, 0, 0}) // a 256-byte frame, one byte of it
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(nc); err != nil {
		t.Fatalf("not disconnected: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("disconnected after %v", d)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "too slow"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line:\n%s", logs)
		}
	}
}

// TestBadFieldsAnswered: a request with missing or malformed fields gets
// an error response naming the field, never a panic or a closed connection.
func TestBadFieldsAnswered(t *testing.T) {
	b := startTest(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reqs := []*Command{
		{Code: codePullMessage, ExtFields: map[string]string{"topic": "t"}},
		{Code: codePullMessage, ExtFields: map[string]string{"consumerGroup": "g", "topic": "t", "queueId": "x", "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0"}},
		{Code: codeSendMessage, ExtFields: map[string]string{"topic": "bad topic!", "queueId": "0"}, Body: []byte("x")},
		{Code: codeSendMessage, ExtFields: map[string]string{"topic": "t", "queueId": "0", "properties": "no-separator"}, Body: []byte("x")},
		{Code: codeSendMessage, ExtFields: map[string]string{"topic": "t", "queueId": "0", "properties": "DELAY\x01abc\x02"}, Body: []byte("x")},
		{Code: codeSendBatchMessage, ExtFields: map[string]string{"topic": "t", "queueId": "0"}, Body: []byte{0, 0, 0, 99, 1}},
		{Code: codeHeartBeat, Body: []byte("not json")},
		{Code: codeUpdateConsumerOffset, ExtFields: map[string]string{"consumerGroup": "g", "topic": "t", "queueId": "0", "commitOffset": "-5"}},
		{Code: codeLockBatchMQ, Body: []byte("[]")},
		{Code: codeConsumerSendMsgBack, ExtFields: map[string]string{"group": "g", "offset": "12345", "originTopic": "t"}},
		{Code: codeGetRouteInfoByTopic, ExtFields: map[string]string{"topic": strings.Repeat("t", 200)}},
	}
	for i, req := range reqs {
		resp := exchange(t, nc, req)
		if resp.Code == respSuccess || resp.Remark == "" {
			t.Errorf("request %d (code %d): got %d %q, want an error", i, req.Code, resp.Code, resp.Remark)
		}
	}
}

// TestConnBudget: a connection's handlers hold at most its byte budget;
// the reader waits for room instead of reading on, except for a frame
// alone.
func TestConnBudget(t *testing.T) {
	c := &conn{budget: 100}
	c.bcond = sync.NewCond(&c.bmu)
	c.acquire(60)
	if !c.mustWaitLocked(60) {
		t.Fatal("a second frame of 60 bytes may go past a budget of 100")
	}
	if c.mustWaitLocked(40) {
		t.Fatal("a frame that fits must not wait")
	}
	c.release(60)
	if c.mustWaitLocked(1000) {
		t.Fatal("a frame alone must not wait, whatever its size")
	}
}

// TestUnknownCodesBounded: a client cycling through request codes cannot
// grow the broker's per-code counts and log lines without bound: past
// maxCountedCodes distinct codes, the rest are counted together and
// logged once, and every one is still answered.
func TestUnknownCodesBounded(t *testing.T) {
	b, logs := startLogged(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const extra = 50
	for i := int32(0); i < maxCountedCodes+extra; i++ {
		code := 20000 + i
		resp := exchange(t, nc, &Command{Code: code, Serialize: serializeJSON})
		if resp.Code != respRequestCodeNotSupp || !strings.Contains(resp.Remark, strconv.Itoa(int(code))) {
			t.Fatalf("code %d: got %d %q", code, resp.Code, resp.Remark)
		}
	}
	if resp := exchange(t, nc, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("cluster info after unknown codes: %d %q", resp.Code, resp.Remark)
	}
	if n := strings.Count(logs.String(), "logged once per code"); n != maxCountedCodes {
		t.Fatalf("%d log lines for single codes, want %d", n, maxCountedCodes)
	}
	if n := strings.Count(logs.String(), "no other is"); n != 1 {
		t.Fatalf("%d log lines for the codes past the bound, want 1", n)
	}
	size := func(m *sync.Map) int {
		n := 0
		m.Range(func(any, any) bool { n++; return true })
		return n
	}
	if n := size(&b.srv.reported); n != maxCountedCodes+1 {
		t.Fatalf("reported holds %d codes, want %d", n, maxCountedCodes+1)
	}
	if n := size(&b.srv.requests); n > maxCountedCodes+1 {
		t.Fatalf("requests holds %d codes, want at most %d", n, maxCountedCodes+1)
	}
	if n := b.srv.Requests(int(codeOther)); n < extra {
		t.Fatalf("%d requests counted past the bound, want at least %d", n, extra)
	}
	// A code counted before the bound keeps its own count.
	if n := b.srv.Requests(20000); n != 1 {
		t.Fatalf("code 20000 counted %d times, want 1", n)
	}
}
