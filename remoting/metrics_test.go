package remoting

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/internal/promtest"
)

// waitMetric waits until the metric key reaches want (a handler counts a
// one-way request, and a connection is dropped, after the client can see
// anything of it), and fails at the deadline.
func waitMetric(t *testing.T, s *Server, key string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := promtest.Values(t, s.Collector())[key]
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v; all: %v", key, got, want, promtest.Values(t, s.Collector()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMetrics shows that /metrics counts requests by code and answer (a
// code hourglass does not serve under one label, so clients add no
// series), one-way requests, their durations, the open connections and
// those the broker closed for a malformed frame.
func TestMetrics(t *testing.T) {
	b := startTest(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if resp := exchange(t, nc, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("cluster info: %d %q", resp.Code, resp.Remark)
	}
	for _, code := range []int32{9999, 12345} {
		if resp := exchange(t, nc, &Command{Code: code}); resp.Code != respRequestCodeNotSupp {
			t.Fatalf("code %d: %d %q", code, resp.Code, resp.Remark)
		}
	}
	if resp := exchange(t, nc, &Command{Code: codeQueryMessage, ExtFields: map[string]string{"topic": "no such/topic", "key": "k"}}); resp.Code == respSuccess {
		t.Fatalf("a query naming a bad topic succeeded")
	}
	oneway := &Command{Code: codeGetBrokerClusterInfo, Flag: flagOneway}
	out, err := oneway.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, b.srv, "hourglass_remoting_requests_total/ONEWAY/GET_BROKER_CLUSTER_INFO", 1)
	m := promtest.Values(t, b.srv.Collector())
	for key, want := range map[string]float64{
		"hourglass_remoting_requests_total/SUCCESS/GET_BROKER_CLUSTER_INFO":        1,
		"hourglass_remoting_requests_total/REQUEST_CODE_NOT_SUPPORTED/unsupported": 2,
		"hourglass_remoting_requests_total/INVALID_PARAMETER/QUERY_MESSAGE":        1,
		"hourglass_remoting_request_seconds/GET_BROKER_CLUSTER_INFO":               2,
		"hourglass_remoting_request_seconds/unsupported":                           2,
		"hourglass_remoting_connections":                                           1,
		"hourglass_remoting_connections_closed_total/" + closeMalformed:            0,
	} {
		if m[key] != want {
			t.Errorf("%s = %v, want %v; all: %v", key, m[key], want, m)
		}
	}

	// A frame longer than the limit: the broker closes the connection.
	bad, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<31-1)
	if _, err := bad.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(bad); err != nil {
		t.Fatalf("reading until the broker closes: %v", err)
	}
	waitMetric(t, b.srv, "hourglass_remoting_connections_closed_total/"+closeMalformed, 1)
	nc.Close()
	waitMetric(t, b.srv, "hourglass_remoting_connections", 0)
}
