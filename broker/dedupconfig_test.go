package broker

import "testing"

func TestDedupConfig(t *testing.T) {
	for _, s := range []string{"", "0s", "-1h", "soon", "1h+last-wins"} {
		if _, err := parseDedupPolicy(s); err == nil {
			t.Errorf("policy %q accepted", s)
		}
	}
	for _, s := range []string{"t", "t=", "../x=1h", "a=1h,b"} {
		if _, err := parseDedupTopics(s); err == nil {
			t.Errorf("topics %q accepted", s)
		}
	}
	m, err := parseDedupTopics("a=delivered+first-wins,b=5m")
	if err != nil || !m["a"].UntilDelivered || !m["a"].FirstWins || m["b"].Window.Minutes() != 5 {
		t.Fatalf("%+v %v", m, err)
	}
}
