package remoting

import (
	"strconv"
	"testing"
)

// TestForgedIDsNotFound: a message ID, offset message ID or offset that
// hourglass did not hand out gets QUERY_NOT_FOUND, for views by ID and
// queries by unique key or key, whatever its form.
func TestForgedIDsNotFound(t *testing.T) {
	b := startTest(t, nil)
	for i := 0; i < 4; i++ {
		send := &Command{Code: codeSendMessage, Body: []byte("x"),
			ExtFields: map[string]string{"producerGroup": "p", "topic": "orders", "queueId": "0"}}
		if resp := b.request(t, send); resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	var reqs []*Command
	for _, off := range []string{"0", "1", "-1", "9223372036854775807", "-9223372036854775808", "123456789"} {
		reqs = append(reqs, &Command{Code: codeViewMessageByID, ExtFields: map[string]string{"offset": off}},
			&Command{Code: codeViewMessageByID, ExtFields: map[string]string{"offset": off, "topic": "orders"}})
	}
	for _, id := range []string{"0A0000010000ABCD0000000000000001", "7F0000010000271A0000000000000000",
		"7F0000010000271AFFFFFFFFFFFFFFFF", "zz", "00000000000000000000000000000000000000000000000000000000"} {
		for _, topic := range []string{"orders", "nosuchtopic"} {
			reqs = append(reqs, &Command{Code: codeQueryMessage, ExtFields: map[string]string{"topic": topic, "key": id,
				"maxNum": "32", "beginTimestamp": "0", "endTimestamp": strconv.FormatInt(1<<62, 10), "_UNIQUE_KEY_QUERY": "true"}},
				&Command{Code: codeQueryMessage, ExtFields: map[string]string{"topic": topic, "key": id,
					"maxNum": "32", "beginTimestamp": "0", "endTimestamp": strconv.FormatInt(1<<62, 10)}})
		}
	}
	for _, req := range reqs {
		if resp := b.request(t, req); resp.Code != respQueryNotFound {
			t.Errorf("code %d %v: got %d %q, want QUERY_NOT_FOUND (%d)", req.Code, req.ExtFields, resp.Code, resp.Remark, respQueryNotFound)
		}
	}
}
