package rocketmq_test

import (
	"crypto/tls"
	"strings"
	"testing"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	gstatus "google.golang.org/grpc/status"

	"github.com/hourglass-mq/hourglass/access/accesstest"
	hgbroker "github.com/hourglass-mq/hourglass/broker"
)

// TestMTLSCertificateIsThePrincipal: with -tls-client-ca, an unsigned call
// whose client certificate the CA issued with common name "billing" acts
// as the principal billing: its rules let it receive as its group and
// refuse a send; a call without a certificate or signature is refused.
func TestMTLSCertificateIsThePrincipal(t *testing.T) {
	dir := t.TempDir()
	path, _ := accesstest.Write(t, dir, map[string][]string{"billing": {"receive:orders/billing"}})
	ca := accesstest.NewCA(t, dir)
	cert, key, _ := ca.Issue(t, dir, "server", "hourglass", true)
	_, _, client := ca.Issue(t, dir, "billing", "billing", false)
	b := startBroker(t, func(c *hgbroker.Config) {
		c.GRPCPlaintext, c.Credentials = false, path
		c.GRPCCertFile, c.GRPCKeyFile, c.TLSClientCA = cert, key, ca.File
	})
	connect := func(certs ...tls.Certificate) pb.MessagingServiceClient {
		conn, err := grpc.NewClient(b.grpc, grpc.WithTransportCredentials(credentials.NewTLS(
			&tls.Config{RootCAs: ca.Pool, ServerName: "localhost", Certificates: certs})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return pb.NewMessagingServiceClient(conn)
	}
	c := connect(client)
	topic := &pb.Resource{Name: "orders"}
	if _, err := c.QueryAssignment(bounded(t), &pb.QueryAssignmentRequest{Topic: topic, Group: &pb.Resource{Name: "billing"},
		Endpoints: endpoints(b.grpc)}); err != nil {
		t.Fatalf("the group's assignment with billing's certificate: %v", err)
	}
	_, err := c.SendMessage(bounded(t), &pb.SendMessageRequest{Messages: []*pb.Message{rawMessage("orders", "0123456789abcdef0123456789abcdef", []byte("x"), nil)}})
	if gstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"billing" may not send orders`) {
		t.Fatalf("a send with billing's certificate: %v, want PermissionDenied", err)
	}
	if _, err := connect().Heartbeat(bounded(t), &pb.HeartbeatRequest{}); gstatus.Code(err) != codes.Unauthenticated {
		t.Fatalf("a call without certificate or signature: %v, want Unauthenticated", err)
	}
}
