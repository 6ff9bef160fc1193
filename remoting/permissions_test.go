package remoting

import (
	"testing"

	"github.com/hourglass-mq/hourglass/access/accesstest"
)

// TestConsumeInternalTopics: %RETRY%<group> is read by that group only;
// %DLQ%<group> by any group the principal consumes as, if it consumes as
// the dead letters' group too (RocketMQ's dead letters are read by a
// group of their own); a principal that may not consume as the dead
// letters' group may not read them.
func TestConsumeInternalTopics(t *testing.T) {
	path, _ := accesstest.Write(t, t.TempDir(), map[string][]string{
		"ops":     {"receive:*"},
		"billing": {"receive:orders/billing"},
	})
	st := accesstest.Store(t, path, "")
	ops, _, ok := st.SigningSecret("ops")
	if !ok {
		t.Fatal("no principal ops")
	}
	billing, _, ok := st.SigningSecret("billing")
	if !ok {
		t.Fatal("no principal billing")
	}
	for _, c := range []struct {
		who          string
		topic, group string
		want         bool
	}{
		{"ops", "%RETRY%billing", "billing", true},
		{"ops", "%RETRY%billing", "repair", false},
		{"ops", "%DLQ%billing", "billing", true},
		{"ops", "%DLQ%billing", "repair", true},
		{"billing", "%RETRY%billing", "billing", true},
		{"billing", "%DLQ%billing", "billing", true},
		{"billing", "%DLQ%billing", "repair", false},
		{"billing", "%DLQ%shipping", "billing", false},
	} {
		p := ops
		if c.who == "billing" {
			p = billing
		}
		if _, _, got := consume(p, c.topic, c.group); got != c.want {
			t.Errorf("%s consuming %s as %s: allowed %v, want %v", c.who, c.topic, c.group, got, c.want)
		}
	}
}
