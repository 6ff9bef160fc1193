package remoting

import "testing"

// TestSendResentIsStoredOnce: a producer that lost the answer to a send
// (its connection failed while the broker's write of the answer did, see
// frameWriter) sends the same message again, with the same UNIQ_KEY. The
// broker stores it once and answers the second send with the first's
// message ID: one ID, one message.
func TestSendResentIsStoredOnce(t *testing.T) {
	b := startTest(t, nil)
	props := formatProperties(map[string]string{propUniqKey: "0A0000010000ABCD0000000000000002", propKeys: "k"})
	send := func() *Command {
		return &Command{Code: codeSendMessage, Body: []byte("body"),
			ExtFields: map[string]string{"producerGroup": "p", "topic": "orders", "queueId": "0", "properties": props}}
	}
	first := b.request(t, send())
	if first.Code != respSuccess {
		t.Fatalf("send: %d %q", first.Code, first.Remark)
	}
	again := b.request(t, send())
	if again.Code != respSuccess {
		t.Fatalf("resend: %d %q", again.Code, again.Remark)
	}
	if id := first.ExtFields["msgId"]; id == "" || again.ExtFields["msgId"] != id {
		t.Fatalf("resend answered message ID %q, the first send %q", again.ExtFields["msgId"], id)
	}
	st, err := b.eng.DescribeTopic("orders")
	if err != nil || st.Sent != 1 {
		t.Fatalf("orders holds %d messages (%v), want 1", st.Sent, err)
	}
}
