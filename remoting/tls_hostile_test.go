package remoting

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	hgrocketmq "github.com/hourglass-mq/hourglass/rocketmq"
)

// TestTLSTransportMismatch: over TLS the route points back at the address
// the client reached; a plaintext client on the TLS listener is closed
// with a log line; and a client that trickles its handshake is cut off
// after the read timeout, not the idle timeout.
func TestTLSTransportMismatch(t *testing.T) {
	dir := t.TempDir()
	tc, err := hgrocketmq.SelfSignedTLS(dir+"/tls", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	secure := startWrapped(t, dir, "127.0.0.1:0", func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.ReadTimeout, o.IdleTimeout = 300*time.Millisecond, time.Minute
	}, func(ln net.Listener) net.Listener { return tls.NewListener(ln, tc) })

	nc, err := tls.Dial("tcp", secure.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	resp := exchange(t, nc, &Command{Code: codeGetRouteInfoByTopic, ExtFields: map[string]string{"topic": "orders"}})
	nc.Close()
	var rd routeData
	if resp.Code != respSuccess || json.Unmarshal(resp.Body, &rd) != nil || len(rd.BrokerDatas) != 1 || rd.BrokerDatas[0].BrokerAddrs["0"] != secure.addr {
		t.Fatalf("route over TLS: %d %q %s, want the broker at %s", resp.Code, resp.Remark, resp.Body, secure.addr)
	}

	// Plaintext on the TLS listener: closed, never answered.
	plain, err := net.Dial("tcp", secure.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	out, _ := (&Command{Code: codeGetBrokerClusterInfo}).encode()
	plain.Write(out)
	plain.SetReadDeadline(time.Now().Add(10 * time.Second))
	// A reset is a close too: the broker may close before it read all the
	// client wrote.
	if got, err := io.ReadAll(plain); (err != nil && !errors.Is(err, syscall.ECONNRESET)) || decodesAsFrame(got) {
		t.Fatalf("plaintext client on TLS: %d bytes (a frame: %v), %v; want the connection closed", len(got), decodesAsFrame(got), err)
	}

	// A handshake one byte at a time: cut off after the read timeout.
	slow, err := net.Dial("tcp", secure.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		io.Copy(io.Discard, slow)
		closed <- time.Since(start)
	}()
	hello := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i, cut := 0, false; !cut; i++ {
		select {
		case d := <-closed:
			if d > 20*time.Second {
				t.Fatalf("a trickled handshake was cut off after %v (read timeout 300 ms)", d)
			}
			cut = true
		case <-tick.C:
			slow.Write(hello[i%len(hello) : i%len(hello)+1])
			if time.Since(start) > 30*time.Second {
				t.Fatal("a trickled handshake was not cut off in 30 s (read timeout 300 ms, idle timeout 1 min)")
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(logs.String(), "TLS handshake failed") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("want a log line per failed handshake:\n%s", logs)
		}
	}

}

// TestTLSClientOnPlaintextListener: a TLS client on the plaintext
// listener fails its handshake, and its ClientHello is logged as a
// malformed frame.
func TestTLSClientOnPlaintextListener(t *testing.T) {
	b, plainLogs := startLogged(t, nil)
	// The dialer's timeout bounds the handshake too: a broker that never
	// answered would fail the test, not hang it.
	if c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", b.addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		c.Close()
		t.Fatal("a TLS handshake with a plaintext listener succeeded")
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(plainLogs.String(), "malformed frame"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for a TLS client on the plaintext listener:\n%s", plainLogs)
		}
	}
}

// decodesAsFrame says whether b holds a remoting frame.
func decodesAsFrame(b []byte) bool {
	buf, err := readFrame(strings.NewReader(string(b)), testLimits)
	if err != nil {
		return false
	}
	_, err = decodeFrame(buf, testLimits)
	return err == nil
}
