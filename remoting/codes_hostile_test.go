package remoting

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUnknownCodesPastInt16Answered: a JSON header's code is a Java int in
// RocketMQ's clients, so a code past the binary header's int16 (70000,
// the int32 extremes) is a code not served: answered
// REQUEST_CODE_NOT_SUPPORTED naming it, on a connection that stays
// usable, with one log line per code however often it comes; a code
// past int32 is a malformed header and closes the connection.
func TestUnknownCodesPastInt16Answered(t *testing.T) {
	b, logs := startLogged(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	codes := []int32{70000, 99999, 2147483647, -2147483648, -40000}
	for i := 0; i < 2; i++ {
		for _, code := range codes {
			resp := exchange(t, nc, &Command{Code: code})
			if resp.Code != respRequestCodeNotSupp || !strings.Contains(resp.Remark, strconv.Itoa(int(code))) {
				t.Fatalf("code %d: %d %q", code, resp.Code, resp.Remark)
			}
		}
	}
	if resp := exchange(t, nc, &Command{Code: codeGetBrokerClusterInfo}); resp.Code != respSuccess {
		t.Fatalf("cluster info after codes past int16: %d %q", resp.Code, resp.Remark)
	}
	if n := strings.Count(logs.String(), "request code not supported"); n != len(codes) {
		t.Fatalf("%d log lines for %d codes past int16 sent twice each, want %d:\n%s", n, len(codes), len(codes), logs)
	}
	h := []byte(`{"code":2147483648,"opaque":1}`)
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(h)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(h)))
	bad, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.Write(append(frame, h...))
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	var one [1]byte
	if n, err := bad.Read(one[:]); n != 0 || err == nil {
		t.Fatalf("a code past int32: read %d bytes, %v; want the connection closed", n, err)
	}
}

// TestSendIntFieldsPastInt32Refused: a send's sysFlag or flag past a Java
// int is refused, naming the field, and stores nothing: wrapped, a
// sysFlag of 2^32+4 would read as a transaction's half message.
func TestSendIntFieldsPastInt32Refused(t *testing.T) {
	b := startTest(t, nil)
	for _, field := range []string{"sysFlag", "flag"} {
		for _, v := range []string{"4294967300", "-2147483649", "9223372036854775807"} {
			resp := b.request(t, &Command{Code: codeSendMessage, Body: []byte("x"),
				ExtFields: map[string]string{"producerGroup": "p", "topic": "orders", "queueId": "0", field: v,
					"properties": formatProperties(map[string]string{propUniqKey: "0A000001000000000000000000000001", propProducerGroup: "p"})}})
			if resp.Code != respInvalidParameter || !strings.Contains(resp.Remark, field) {
				t.Errorf("%s=%s: %d %q, want INVALID_PARAMETER naming the field", field, v, resp.Code, resp.Remark)
			}
		}
	}
	for _, topic := range []string{"orders", halfTopic} {
		if _, _, ok := b.eng.TopicKind(topic); ok {
			t.Errorf("a refused send created topic %s", topic)
		}
	}
}
