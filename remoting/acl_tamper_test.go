package remoting

import (
	"strings"
	"testing"
)

// TestACLTampering: with a secret set, a request whose signed fields or
// body changed after signing, whose signature is not base64 or is
// missing, or that has no access key is refused with NO_PERMISSION, in
// both header encodings, for name-server and broker requests alike, and
// a refused send stores nothing.
func TestACLTampering(t *testing.T) {
	b := startTest(t, func(o *Options) { o.AccessSecret = "s3cret" })
	route := func() *Command {
		return &Command{Code: codeGetRouteInfoByTopic, ExtFields: map[string]string{"topic": "orders"}}
	}
	send := func() *Command {
		return &Command{Code: codeSendMessage, Body: []byte("signed body"), ExtFields: map[string]string{"producerGroup": "p",
			"topic": "orders", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0", "properties": ""}}
	}
	for _, typ := range []byte{serializeJSON, serializeRocketMQ} {
		for _, ok := range []*Command{signAs(route(), "ak", "s3cret"), signAs(send(), "ak", "s3cret")} {
			ok.Serialize = typ
			if r := b.request(t, ok); r.Code != respSuccess {
				t.Fatalf("a signed request (code %d, type %d): %d %q", ok.Code, typ, r.Code, r.Remark)
			}
		}
		tampered := map[string]*Command{}
		c := signAs(send(), "ak", "s3cret")
		c.Body = []byte("changed body")
		tampered["body changed"] = c
		c = signAs(send(), "ak", "s3cret")
		c.ExtFields["topic"] = "ledger"
		tampered["topic changed"] = c
		c = signAs(send(), "ak", "s3cret")
		c.ExtFields["queueId"] = "1"
		tampered["queue changed"] = c
		c = signAs(send(), "ak", "s3cret")
		c.ExtFields["properties"] = "DELAY\x011\x02"
		tampered["field added"] = c
		c = signAs(send(), "ak", "s3cret")
		c.ExtFields[aclAccessKey] = "other"
		tampered["access key changed"] = c
		c = signAs(send(), "ak", "s3cret")
		c.ExtFields[aclSignature] = "%%%not base64"
		tampered["signature not base64"] = c
		c = signAs(send(), "ak", "s3cret")
		delete(c.ExtFields, aclSignature)
		tampered["no signature"] = c
		c = signAs(send(), "ak", "s3cret")
		delete(c.ExtFields, aclAccessKey)
		tampered["no access key"] = c
		c = signAs(route(), "ak", "s3cret")
		c.ExtFields["topic"] = "ledger"
		tampered["route topic changed"] = c
		c = signAs(route(), "ak", "wrong")
		tampered["route wrong secret"] = c
		tampered["route unsigned"] = route()
		for name, c := range tampered {
			c.Serialize = typ
			if r := b.request(t, c); r.Code != respNoPermission || r.Remark == "" {
				t.Errorf("%s (type %d): %d %q, want NO_PERMISSION with a reason", name, typ, r.Code, r.Remark)
			}
		}
	}
	st, err := b.eng.DescribeTopic("orders")
	if err != nil || st.Sent != 2 {
		t.Fatalf("orders holds %+v (%v), want the 2 signed sends", st, err)
	}
	if _, err := b.eng.DescribeTopic("ledger"); err == nil || !strings.Contains(err.Error(), "ledger") {
		t.Fatalf("a tampered send reached topic ledger: %v", err)
	}
}
