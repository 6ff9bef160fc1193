package browser_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// group is the part of a group answer the tests read.
type group struct {
	Name        string `json:"name"`
	MaxAttempts int    `json:"max_attempts"`
	BackoffBase string `json:"backoff_base"`
	Backlog     int64  `json:"backlog"`
	Paused      bool   `json:"paused"`
}

func (b *broker) group(topic, name string) group {
	b.t.Helper()
	var out struct {
		Groups []group `json:"groups"`
	}
	b.call("GET", "/v1/topics/"+topic+"/groups", nil, http.StatusOK, &out)
	for _, g := range out.Groups {
		if g.Name == name {
			return g
		}
	}
	b.t.Fatalf("no group %s of %s", name, topic)
	return group{}
}

// TestConsoleGroupAdmin: from the Topics & groups page an operator creates
// a group with its policy before its topic exists, changes the policy of a
// group a receive made, pauses it (the table marks it), resumes it, and
// seeks it back to the start; each change is checked against the broker.
// Bad input is refused with a message, and changes nothing.
func TestConsoleGroupAdmin(t *testing.T) {
	needBrowser(t)
	b := startBroker(t, "")
	tb := newTab(t)
	tb.do(chromedp.Navigate(b.base+"/ui/#/topics"), chromedp.WaitVisible("#ga-topic"))
	tb.do(chromedp.SendKeys("#ga-topic", "jobs"), chromedp.SendKeys("#ga-group", "workers"), chromedp.SendKeys("#ga-attempts", "2"),
		chromedp.Click("#ga-create"))
	tb.waitText("#ga-result", "Created: jobs/workers: running, 2 attempts")
	if g := b.group("jobs", "workers"); g.MaxAttempts != 2 {
		t.Fatalf("the broker has %+v", g)
	}

	// A group made by a receive, with the defaults, that acked one message.
	b.call("POST", "/v1/topics/jobs/messages", map[string]any{"body": "x"}, http.StatusOK, nil)
	_, rc := b.receiveOne("jobs", "billing")
	b.call("POST", "/v1/topics/jobs/groups/billing/ack", map[string]any{"receipts": []string{rc}}, http.StatusOK, nil)
	tb.waitText(`#groups-table tr[data-group="jobs/billing"]`, "billing")
	tb.do(chromedp.Click(`#groups-table tr[data-group="jobs/billing"] button:nth-of-type(2)`))
	if got := tb.eval(`document.querySelector("#ga-attempts").value`); got != "16" {
		t.Fatalf("Change… filled max attempts with %q, want the group's 16", got)
	}
	tb.do(chromedp.SetValue("#ga-attempts", "5000"), chromedp.Click("#ga-policy"))
	tb.waitText("#ga-result", "Changed failed: max attempts 5000 is not in [1, 1000]")
	tb.do(chromedp.SetValue("#ga-attempts", "4"), chromedp.SetValue("#ga-base", "2s"), chromedp.Click("#ga-policy"))
	tb.waitText("#ga-result", "Changed: jobs/billing: running, 4 attempts, backoff 2s..5m0s")
	if g := b.group("jobs", "billing"); g.MaxAttempts != 4 || g.BackoffBase != "2s" {
		t.Fatalf("the broker has %+v", g)
	}

	tb.do(chromedp.Click("#ga-pause"), chromedp.WaitVisible("#confirm"))
	tb.waitText("#confirm-text", "receive nothing until it is resumed")
	tb.do(chromedp.Click("#confirm-ok"))
	tb.waitText("#ga-result", "Paused: jobs/billing: paused")
	tb.waitText(`#groups-table tr[data-group="jobs/billing"]`, "paused")
	if !b.group("jobs", "billing").Paused {
		t.Fatal("the broker's group is not paused")
	}
	tb.do(chromedp.SetValue("#ga-to", "yesterday-ish"), chromedp.Click("#ga-seek"))
	tb.waitText("#ga-result", "Seek to: give now, 0")
	tb.do(chromedp.SetValue("#ga-to", "0"), chromedp.Click("#ga-seek"), chromedp.WaitVisible("#confirm"))
	tb.waitText("#confirm-text", "the start of its queues")
	tb.do(chromedp.Click("#confirm-ok"))
	tb.waitText("#ga-result", "1 message(s) to deliver again, 0 skipped")
	if g := b.group("jobs", "billing"); g.Backlog != 1 {
		t.Fatalf("after the seek the broker's group has %+v", g)
	}
	tb.eval(`document.querySelector("#groups-table").scrollIntoView({block: "start"}), ""`)
	tb.docShot("groups-admin")
	tb.do(chromedp.Click("#ga-resume"))
	tb.waitText("#ga-result", "Resumed: jobs/billing: running")
	if strings.Contains(tb.eval(`document.querySelector('#groups-table tr[data-group="jobs/billing"]').textContent`), "paused") {
		// The table refreshes after each change.
		tb.waitText("#ga-result", "running")
	}
	// The one refused change is the page's only error: the broker's 400,
	// which the page showed as its message.
	requests, errs, _ := tb.ev.snapshot()
	refused := 0
	for _, m := range errs {
		if strings.Contains(m, "status of 400") && strings.HasSuffix(m, b.base+"/v1/topics/jobs/groups/billing") {
			refused++
			continue
		}
		t.Errorf("browser error: %s", m)
	}
	if refused != 1 {
		t.Errorf("%d refused changes logged, want the one bad policy", refused)
	}
	for _, u := range requests {
		if !strings.HasPrefix(u, b.base+"/") {
			t.Errorf("request outside the broker's origin: %s", u)
		}
	}
}
