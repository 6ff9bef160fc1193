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

	hgrocketmq "github.com/hourglass-mq/hourglass/rocketmq"
)

// TestClientACL: with a secret set, the official client's ACL signature
// (access key, secret key) is required: signed requests are served, an
// unsigned or wrongly signed one is refused with NO_PERMISSION.
func TestClientACL(t *testing.T) {
	b := startTest(t, func(o *Options) { o.AccessSecret = "s3cret" })
	creds := primitive.Credentials{AccessKey: "any", SecretKey: "s3cret"}
	p := newProducer(t, b, producer.WithCredentials(creds))
	_, got := newPush(t, b, "acl", "guarded", consumer.MessageSelector{}, nil, consumer.WithCredentials(creds))
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("guarded", []byte("signed"))); err != nil {
		t.Fatal(err)
	}
	if d := waitFor(t, got, 10*time.Second); string(d.msg.Body) != "signed" {
		t.Fatalf("got %q", d.msg.Body)
	}
	bad := newProducerNoStartCheck(t, b, producer.WithCredentials(primitive.Credentials{AccessKey: "any", SecretKey: "wrong"}))
	if _, err := bad.SendSync(context.Background(), primitive.NewMessage("guarded", []byte("forged"))); err == nil {
		t.Fatal("a send signed with the wrong secret was accepted")
	}
	resp := b.request(t, &Command{Code: codeGetBrokerClusterInfo})
	if resp.Code != respNoPermission || !strings.Contains(resp.Remark, "ACL") {
		t.Fatalf("unsigned request: %d %q", resp.Code, resp.Remark)
	}
}

// TestClientTLS: the remoting listener over TLS serves the official
// client with its TLS option on.
func TestClientTLS(t *testing.T) {
	dir := t.TempDir()
	tc, err := hgrocketmq.SelfSignedTLS(dir+"/tls", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	b := startWrapped(t, dir, "127.0.0.1:0", nil, func(ln net.Listener) net.Listener { return tls.NewListener(ln, tc) })
	// The client's TLS option writes into its process-wide default
	// configuration, so every later client would dial TLS too: set it
	// back once this test is done (a client's option is applied when it
	// is made).
	t.Cleanup(func() { rocketmq.NewProducer(producer.WithTls(false)) })
	p := newProducer(t, b, producer.WithTls(true))
	_, got := newPush(t, b, "tls", "secure", consumer.MessageSelector{}, nil, consumer.WithTls(true))
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("secure", []byte("over tls")).WithDelayTimeLevel(1)); err != nil {
		t.Fatal(err)
	}
	if d := waitFor(t, got, 10*time.Second); string(d.msg.Body) != "over tls" {
		t.Fatalf("got %q", d.msg.Body)
	}
}
