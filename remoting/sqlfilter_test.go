package remoting

import (
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
