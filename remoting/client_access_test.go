//go:build !race

package remoting

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/hourglass-mq/hourglass/access/accesstest"
	hgrocketmq "github.com/hourglass-mq/hourglass/rocketmq"
)

// TestClientAccessOverTLS: the official 4.x Go client over TLS, with
// AclClientRPCHook credentials of file principals: a producer allowed to
// send to orders sends, a push consumer allowed group billing of orders
// gets it, and a producer allowed only another topic, or signing with a
// wrong secret, is refused.
func TestClientAccessOverTLS(t *testing.T) {
	dir := t.TempDir()
	path, secrets := accesstest.Write(t, dir, map[string][]string{
		"producer": {"send:orders"}, "consumer": {"receive:orders/billing"}, "elsewhere": {"send:invoices"},
	})
	tc, err := hgrocketmq.SelfSignedTLS(dir+"/tls", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	b := startWrapped(t, dir, "127.0.0.1:0", func(o *Options) { o.Access = accesstest.Store(t, path, "") },
		func(ln net.Listener) net.Listener { return tls.NewListener(ln, tc) })
	t.Cleanup(func() { rocketmq.NewProducer(producer.WithTls(false)) })
	as := func(name, secret string) primitive.Credentials {
		return primitive.Credentials{AccessKey: name, SecretKey: secret}
	}
	p := newProducer(t, b, producer.WithTls(true), producer.WithCredentials(as("producer", secrets["producer"])))
	_, got := newPush(t, b, "billing", "orders", consumer.MessageSelector{}, nil,
		consumer.WithTls(true), consumer.WithCredentials(as("consumer", secrets["consumer"])))
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("orders", []byte("allowed"))); err != nil {
		t.Fatal(err)
	}
	if d := waitFor(t, got, 10*time.Second); string(d.msg.Body) != "allowed" {
		t.Fatalf("got %q", d.msg.Body)
	}
	for what, c := range map[string]primitive.Credentials{
		"allowed elsewhere": as("elsewhere", secrets["elsewhere"]),
		"a wrong secret":    as("producer", secrets["consumer"]),
	} {
		bad := newProducerNoStartCheck(t, b, producer.WithTls(true), producer.WithCredentials(c))
		_, err := bad.SendSync(context.Background(), primitive.NewMessage("orders", []byte("refused")))
		if err == nil {
			t.Errorf("a send as a principal %s was accepted", what)
		} else if what == "allowed elsewhere" && !strings.Contains(err.Error(), "may not") && !strings.Contains(err.Error(), "route") {
			t.Errorf("a send as a principal %s: %v", what, err)
		}
	}
}
