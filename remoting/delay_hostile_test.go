package remoting

import (
	"net"
	"testing"
)

// TestDelayAndTimerInput: delay levels and timer properties of every
// hostile form are answered on one connection that stays open: levels 0
// and below and timers in the past are sent at once, a level past the
// table is its last level, and a value that is not a number, or a time
// past the maximum delay, is refused with a reason.
func TestDelayAndTimerInput(t *testing.T) {
	b := startTest(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cases := []struct {
		name, value string
		ok          bool
	}{
		{propDelay, "0", true}, {propDelay, "-1", true}, {propDelay, "-2147483649", true}, {propDelay, "999999", true},
		{propDelay, "9223372036854775807", true}, {propDelay, "abc", false}, {propDelay, "99999999999999999999", false},
		{propDelay, "1.5", false},
		{propTimerDeliverMs, "1", true}, {propTimerDeliverMs, "-1", true}, {propTimerDeliverMs, "abc", false},
		{propTimerDeliverMs, "99999999999999999999", false}, {propTimerDeliverMs, "9223372036854775807", false},
		{propTimerDelayMs, "-5", true}, {propTimerDelayMs, "9223372036854775807", false}, {propTimerDelayMs, "-9223372036854775808", true},
		{propTimerDelaySec, "9223372036854775807", false}, {propTimerDelaySec, "-9223372036854775808", true},
		{propTimerDelaySec, "1e3", false},
	}
	for _, c := range cases {
		send := &Command{Code: codeSendMessage, Body: []byte("x"), ExtFields: map[string]string{"producerGroup": "p",
			"topic": "orders", "queueId": "0", "properties": formatProperties(map[string]string{c.name: c.value})}}
		resp := exchange(t, nc, send)
		if c.ok && resp.Code != respSuccess {
			t.Errorf("%s=%q: %d %q, want success", c.name, c.value, resp.Code, resp.Remark)
		}
		if !c.ok && (resp.Code == respSuccess || resp.Remark == "") {
			t.Errorf("%s=%q: %d %q, want an error with a reason", c.name, c.value, resp.Code, resp.Remark)
		}
	}
}
