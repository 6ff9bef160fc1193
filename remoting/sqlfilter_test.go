package remoting

import (
	"net"
	"strings"
	"testing"
)

// TestCheckClientConfigRefusesSQL: the Java client's check of a SQL92
// subscription as its consumer starts is refused, saying why; a TAG one
// passes.
func TestCheckClientConfigRefusesSQL(t *testing.T) {
	b := startTest(t, nil)
	check := func(body string) *Command {
		return b.request(t, &Command{Code: codeCheckClientConfig, Body: []byte(body)})
	}
	resp := check(`{"clientId":"c1","group":"g","subscriptionData":{"topic":"t","subString":"a > 1","expressionType":"SQL92"}}`)
	if resp.Code != respSubscriptionParse || !strings.Contains(resp.Remark, "SQL92") || !strings.Contains(resp.Remark, "TAG") {
		t.Fatalf("SQL92: %d %q", resp.Code, resp.Remark)
	}
	if resp := check(`{"clientId":"c1","group":"g","subscriptionData":{"topic":"t","subString":"a","expressionType":"TAG"}}`); resp.Code != respSuccess {
		t.Fatalf("TAG: %d %q", resp.Code, resp.Remark)
	}
	if resp := check(`not json`); resp.Code != respInvalidParameter || resp.Remark == "" {
		t.Fatalf("bad body: %d %q", resp.Code, resp.Remark)
	}
}

// TestHeartbeatRefusesOnlyItsBadGroup: a heartbeat's consumer group whose
// retry topic cannot be named (RocketMQ allows '|' in a group's name;
// hourglass's topics do not) is refused by name; the heartbeat's other
// group is recorded all the same.
func TestHeartbeatRefusesOnlyItsBadGroup(t *testing.T) {
	b := startTest(t, nil)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	resp := exchange(t, nc, &Command{Code: codeHeartBeat, Body: []byte(`{"clientID":"c1","consumerDataSet":[` +
		`{"groupName":"a|b","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"t","subString":"*"}]},` +
		`{"groupName":"fine","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"t","subString":"*"}]}]}`)})
	if resp.Code != respInvalidParameter || !strings.Contains(resp.Remark, `"a|b"`) {
		t.Fatalf("got %d %q", resp.Code, resp.Remark)
	}
	if m := b.srv.clients.members("fine"); len(m) != 1 {
		t.Fatalf("the valid group's members: %v", m)
	}
	if _, _, ok := b.eng.TopicKind("%RETRY%fine"); !ok {
		t.Fatal("the valid group's retry topic was not created")
	}
}
