package browser_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// received is the part of a receive answer the tests read.
type received struct {
	Messages []struct {
		ID      string `json:"id"`
		Receipt string `json:"receipt"`
	} `json:"messages"`
}

// receiveOne receives one message of topic for group, waiting for it.
func (b *broker) receiveOne(topic, group string) (id, receipt string) {
	b.t.Helper()
	var r received
	b.call("POST", "/v1/topics/"+topic+"/groups/"+group+"/receive", map[string]any{"max": 1, "wait": "10s"}, http.StatusOK, &r)
	if len(r.Messages) != 1 {
		b.t.Fatalf("receive %s/%s: %d messages", topic, group, len(r.Messages))
	}
	return r.Messages[0].ID, r.Messages[0].Receipt
}

// TestConsoleMessageTrail: the message page lists the history the broker
// recorded, each event with its time: a message delivered, nacked,
// delivered again and acked; and one dead-lettered, whose copy the page
// links to and whose own events follow.
func TestConsoleMessageTrail(t *testing.T) {
	needBrowser(t)
	b := startBroker(t, "")
	b.call("PUT", "/v1/topics/orders", map[string]any{}, http.StatusCreated, nil)
	b.call("PUT", "/v1/topics/orders/groups/billing", map[string]any{"max_attempts": 1}, http.StatusCreated, nil)
	b.call("POST", "/v1/topics/orders/messages", map[string]any{"body": "close unpaid order 5", "key": "order-5"}, http.StatusOK, nil)
	b.call("POST", "/v1/topics/orders/messages", map[string]any{"body": "close unpaid order 6", "key": "order-6"}, http.StatusOK, nil)
	b.call("PUT", "/v1/topics/orders/groups/audit", map[string]any{"max_attempts": 5}, http.StatusCreated, nil)

	// order-5 in group audit: nacked once, then acked; order-6 in billing:
	// nacked at its only attempt, so dead-lettered.
	ids := map[string]string{}
	for range 2 {
		id, rc := b.receiveOne("orders", "audit")
		ids[id] = rc
	}
	five := b.inspectKey("orders", "order-5").ID
	six := b.inspectKey("orders", "order-6").ID
	b.call("POST", "/v1/topics/orders/groups/audit/ack", map[string]any{"receipts": []string{ids[six]}}, http.StatusOK, nil)
	b.call("POST", "/v1/topics/orders/groups/audit/nack", map[string]any{"receipt": ids[five], "delay": "1ms"}, http.StatusOK, nil)
	id, rc := b.receiveOne("orders", "audit")
	if id != five {
		t.Fatalf("redelivered %s, want order-5 %s", id, five)
	}
	b.call("POST", "/v1/topics/orders/groups/audit/ack", map[string]any{"receipts": []string{rc}}, http.StatusOK, nil)
	for range 2 {
		id, rc := b.receiveOne("orders", "billing")
		if id == six {
			b.call("POST", "/v1/topics/orders/groups/billing/nack", map[string]any{"receipt": rc}, http.StatusOK, nil)
		} else {
			b.call("POST", "/v1/topics/orders/groups/billing/ack", map[string]any{"receipts": []string{rc}}, http.StatusOK, nil)
		}
	}

	tb := newTab(t)
	tb.do(chromedp.Navigate(b.base + "/ui/#/message/" + five))
	tb.waitText("#msg-history", "acked")
	for _, want := range []string{"sent", "fell due", "made visible", "delivered — group audit, attempt 1", "nacked — group audit, attempt 1; back at",
		"delivered — group audit, attempt 2", "acked — group audit, attempt 2", "acked — group billing, attempt 1"} {
		tb.waitText("#msg-history", want)
	}
	tb.waitText("#msg-trail-cost", "bytes of the commit log")
	if n := tb.eval(`String(document.querySelectorAll("#msg-history li time").length)`); n != "9" {
		t.Errorf("order-5's history has %s timed events, want 9:\n%s", n, tb.eval(`document.querySelector("#msg-history").innerText`))
	}
	if got := tb.eval(`document.body.innerText.includes("time not kept") ? "yes" : "no"`); got != "no" {
		t.Error(`the page still says "time not kept"`)
	}
	tb.eval(`document.querySelector("#msg-history").scrollIntoView({block: "center"}), ""`)
	tb.docShot("message-trail")

	tb.do(chromedp.Navigate(b.base + "/ui/#/message/" + six))
	tb.waitText("#msg-history", "dead-lettered — group billing, attempt 1; reason max-attempts; copy ")
	tb.waitText("#msg-history", "events of the dead-letter copy")
	tb.eval(`document.querySelector("#msg-history").scrollIntoView({block: "center"}), ""`)
	tb.docShot("message-trail-dead-letter")
	// The copy's link opens the copy's page, whose own trail starts at its
	// sending to the dead-letter topic.
	tb.do(chromedp.Click(`#msg-history li[data-kind="dead_lettered"] a`))
	tb.waitText("#msg-topic", "%DLQ%orders.billing")
	tb.waitText("#msg-history", "made visible")
	tb.ev.checkClean(t, b.base)
}
