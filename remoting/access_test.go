package remoting

import (
	"crypto/tls"
	"encoding/base64"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/access/accesstest"
	"github.com/hourglass-mq/hourglass/internal/tlsreload"
)

// accessBroker serves remoting over TLS with a client CA (mTLS optional)
// and a credentials file; it returns the broker, the secrets, the CA and
// a client certificate whose common name is "consumer".
func accessBroker(t *testing.T) (*testBroker, map[string]string, *accesstest.CA, tls.Certificate, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	path, secrets := accesstest.Write(t, dir, map[string][]string{
		"producer":  {"send:orders"},
		"consumer":  {"receive:orders/billing"},
		"operator":  {"manage:orders"},
		"elsewhere": {"send:invoices", "receive:invoices/billing", "manage:invoices"},
	})
	ca := accesstest.NewCA(t, dir)
	cert, key, _ := ca.Issue(t, dir, "server", "hourglass", true)
	_, _, client := ca.Issue(t, dir, "client", "consumer", false)
	r, err := tlsreload.New(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tlsreload.ServerConfig(r, ca.File)
	if err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	b := startWrapped(t, dir, "127.0.0.1:0", func(o *Options) {
		o.Access = accesstest.Store(t, path, "")
		o.Audit = access.NewAudit(slog.New(slog.NewJSONHandler(audit, nil)))
	}, func(ln net.Listener) net.Listener { return tls.NewListener(ln, tc) })
	return b, secrets, ca, client, audit
}

// tlsRequest sends one command over a new TLS connection, with a client
// certificate when cert is not nil.
func tlsRequest(t *testing.T, b *testBroker, ca *accesstest.CA, cert *tls.Certificate, c *Command) *Command {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	nc, err := tls.Dial("tcp", b.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	return exchange(t, nc, c)
}

// signAs signs c as AclClientRPCHook does, with access key name.
func signAs(c *Command, name, secret string) *Command {
	c.ExtFields[aclAccessKey] = name
	c.ExtFields[aclSignature] = base64.StdEncoding.EncodeToString(sign(c, secret, true))
	return c
}

// The matrix's requests, one per action the protocol has.
func sendCmd() *Command {
	return &Command{Code: codeSendMessage, ExtFields: map[string]string{"producerGroup": "p", "topic": "orders",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0", "properties": ""}, Body: []byte("b")}
}

func pullCmd() *Command {
	return &Command{Code: codePullMessage, ExtFields: map[string]string{"consumerGroup": "billing", "topic": "orders",
		"queueId": "0", "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*"}}
}

func queryCmd() *Command {
	return &Command{Code: codeQueryMessage, ExtFields: map[string]string{"topic": "orders", "key": "k", "maxNum": "1",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10)}}
}

// TestAccessMatrixOverTLS: each action over TLS, as a principal allowed
// it, one allowed it elsewhere, one allowed another action, without
// credentials and with a wrong secret; refusals are NO_PERMISSION naming
// the action and resource. A client certificate's common name is a
// principal when the request carries no signature.
func TestAccessMatrixOverTLS(t *testing.T) {
	b, secrets, ca, client, audit := accessBroker(t)
	cases := []struct {
		action                   string
		cmd                      func() *Command
		allowed, wrong, resource string
	}{
		{"send", sendCmd, "producer", "consumer", "orders"},
		{"receive", pullCmd, "consumer", "producer", "orders/billing"},
		{"manage", queryCmd, "operator", "producer", "orders"},
	}
	for _, c := range cases {
		if r := tlsRequest(t, b, ca, nil, signAs(c.cmd(), c.allowed, secrets[c.allowed])); r.Code == respNoPermission {
			t.Errorf("%s as %s: refused: %s", c.action, c.allowed, r.Remark)
		}
		for _, who := range []string{"elsewhere", c.wrong} {
			r := tlsRequest(t, b, ca, nil, signAs(c.cmd(), who, secrets[who]))
			want := `principal "` + who + `" may not ` + c.action + " " + c.resource
			if r.Code != respNoPermission || r.Remark != want {
				t.Errorf("%s as %s: %d %q, want NO_PERMISSION %q", c.action, who, r.Code, r.Remark, want)
			}
		}
		if r := tlsRequest(t, b, ca, nil, c.cmd()); r.Code != respNoPermission || !strings.Contains(r.Remark, "requires ACL credentials") {
			t.Errorf("%s without credentials: %d %q", c.action, r.Code, r.Remark)
		}
		if r := tlsRequest(t, b, ca, nil, signAs(c.cmd(), c.allowed, secrets["elsewhere"])); r.Code != respNoPermission || !strings.Contains(r.Remark, "does not verify") {
			t.Errorf("%s with a wrong secret: %d %q", c.action, r.Code, r.Remark)
		}
	}
	// mTLS: the certificate of "consumer" pulls unsigned, and may not send.
	if r := tlsRequest(t, b, ca, &client, pullCmd()); r.Code == respNoPermission {
		t.Errorf("a pull with the consumer's certificate: %q", r.Remark)
	}
	if r := tlsRequest(t, b, ca, &client, sendCmd()); r.Code != respNoPermission || !strings.Contains(r.Remark, `"consumer" may not send orders`) {
		t.Errorf("a send with the consumer's certificate: %d %q", r.Code, r.Remark)
	}
	if trail := audit.String(); !strings.Contains(trail, `"result":"denied"`) || !strings.Contains(trail, `"action":"manage"`) {
		t.Errorf("audit trail: %s", trail)
	}
}

// TestAccessHeartbeatJoinsOnlyOwnGroups: a heartbeat that joins a group
// moves that group's queues among its members, so only a principal that
// consumes the group, from the topics it subscribes, may send one.
func TestAccessHeartbeatJoinsOnlyOwnGroups(t *testing.T) {
	b, secrets, ca, _, _ := accessBroker(t)
	hb := func(group, topic string) *Command {
		body := `{"clientID":"c1","producerDataSet":[],"consumerDataSet":[{"groupName":"` + group +
			`","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"` + topic + `","subString":"*"},{"topic":"%RETRY%` + group + `","subString":"*"}]}]}`
		return &Command{Code: codeHeartBeat, ExtFields: map[string]string{}, Body: []byte(body)}
	}
	if r := tlsRequest(t, b, ca, nil, signAs(hb("billing", "orders"), "consumer", secrets["consumer"])); r.Code != respSuccess {
		t.Fatalf("the consumer's own heartbeat: %d %q", r.Code, r.Remark)
	}
	for _, c := range []struct{ who, group, topic, says string }{
		{"producer", "billing", "orders", `may not receive */billing`},
		{"consumer", "shipping", "orders", `may not receive */shipping`},
		{"elsewhere", "billing", "orders", `may not receive orders/billing`},
	} {
		r := tlsRequest(t, b, ca, nil, signAs(hb(c.group, c.topic), c.who, secrets[c.who]))
		if r.Code != respNoPermission || !strings.Contains(r.Remark, c.says) {
			t.Errorf("%s joining %s of %s: %d %q, want NO_PERMISSION %q", c.who, c.group, c.topic, r.Code, r.Remark, c.says)
		}
	}
}
