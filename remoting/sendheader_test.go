package remoting

import "testing"

// TestReadSendHeaderV2: SEND_MESSAGE_V2's one-letter fields (and a batch's,
// when it uses them) read as SEND_MESSAGE's long ones; a short name wins
// over a long one in a V2 request; SEND_MESSAGE reads only long names.
func TestReadSendHeaderV2(t *testing.T) {
	v2 := &Command{Code: codeSendMessageV2, ExtFields: map[string]string{"a": "pg", "b": "orders", "e": "3", "f": "0",
		"g": "1700000000000", "h": "5", "i": "DELAY\x012\x02", "j": "1", "l": "7", "topic": "ignored"}}
	h, err := readSendHeader(v2)
	if err != nil {
		t.Fatal(err)
	}
	if h.group != "pg" || h.topic != "orders" || h.queue != 3 || h.born != 1700000000000 || h.flag != 5 ||
		h.props != "DELAY\x012\x02" || h.reconsume != 1 || h.maxReconsume != 7 {
		t.Fatalf("V2 header read as %+v", h)
	}
	batch := &Command{Code: codeSendBatchMessage, ExtFields: map[string]string{"a": "pg", "b": "orders", "e": "1"}}
	if h, err := readSendHeader(batch); err != nil || h.topic != "orders" || h.queue != 1 {
		t.Fatalf("a batch with short names: %+v, %v", h, err)
	}
	v1 := &Command{Code: codeSendMessage, ExtFields: map[string]string{"b": "short", "topic": "orders", "queueId": "2"}}
	if h, err := readSendHeader(v1); err != nil || h.topic != "orders" || h.queue != 2 || h.maxReconsume != 16 {
		t.Fatalf("SEND_MESSAGE: %+v, %v", h, err)
	}
	missing := &Command{Code: codeSendMessageV2, ExtFields: map[string]string{"a": "pg", "e": "0"}}
	if _, err := readSendHeader(missing); err == nil {
		t.Fatal("a V2 send without a topic was read")
	}
}
