package browser_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/hourglass-mq/hourglass/access/accesstest"
)

// TestConsoleOffersOnlyWhatTheRulesAllow: a principal signed in by name
// and secret sees what its rules name and is offered only what they
// allow: a consumer of one group gets no overview (metrics) and no
// message search (manage), and the broker refuses its direct calls
// anyway; an operator who may manage the topic finds a message and may
// cancel it, and reads the overview without the damage report it may not
// read.
func TestConsoleOffersOnlyWhatTheRulesAllow(t *testing.T) {
	needBrowser(t)
	dir := t.TempDir()
	creds, secrets := accesstest.Write(t, dir, map[string][]string{
		"consumer": {"receive:orders/billing"},
		"ops":      {"manage:orders", "metrics:*"},
	})
	b := startBrokerOn(t, "root-token", t.TempDir(), "--credentials", creds)
	b.call("POST", "/v1/topics/orders/messages", map[string]any{"key": "order-1", "body": "x", "delay": "1h"}, http.StatusOK, nil)
	b.call("POST", "/v1/topics/payroll/messages", map[string]any{"key": "salary-1", "body": "x", "delay": "1h"}, http.StatusOK, nil)
	b.call("PUT", "/v1/topics/orders/groups/billing", map[string]any{}, http.StatusCreated, nil)

	tb := newTab(t)
	signIn := func(name string) {
		tb.do(chromedp.Navigate(b.base+"/ui/"), chromedp.WaitVisible("#login-token"))
		tb.do(chromedp.SendKeys("#login-name", name), chromedp.SendKeys("#login-token", secrets[name]+kb.Enter))
		tb.waitText("#whoami", "signed in as "+name)
	}
	signIn("consumer")
	tb.waitText("#topics-table", "orders")
	for _, page := range []string{"overview", "find"} {
		if got := tb.eval(`String(document.querySelector('nav a[data-page="` + page + `"]').hidden)`); got != "true" {
			t.Errorf("the %s page is offered to a consumer", page)
		}
	}
	if txt := tb.eval(`document.body.innerText`); strings.Contains(txt, "payroll") {
		t.Errorf("the consumer sees a topic no rule of its names:\n%s", txt)
	}
	// The page's own calls are refused by the broker, whatever it offers.
	tok := tb.eval(`sessionStorage.getItem("hourglass.token")`)
	if !strings.HasPrefix(tok, "consumer:") {
		t.Fatalf("the session holds %q", tok)
	}
	if got := tb.eval(`fetch("/v1/topics/orders/keys/order-1", {headers: {Authorization: "Bearer " + sessionStorage.getItem("hourglass.token")}}).then(r => String(r.status))`); got != "403" {
		t.Errorf("the consumer's lookup by key answered %s, want 403", got)
	}

	tb.do(chromedp.Click("#logout"))
	signIn("ops")
	// The overview works without admin:damage, and says what it leaves out.
	tb.waitText("#m-pending", "2")
	tb.waitText("#m-scrub", "needs admin:damage")
	tb.do(chromedp.Navigate(b.base + "/ui/#/find"))
	tb.do(chromedp.WaitVisible("#find-key"), chromedp.SetValue("#find-topic", "orders"), chromedp.SendKeys("#find-key-input", "order-1"+kb.Enter))
	tb.waitText("#msg-key", "order-1")
	if got := tb.eval(`String(document.querySelector("#msg-cancel").disabled)`); got != "false" {
		t.Errorf("cancel is not offered to a principal that may manage orders")
	}
}
