package browser_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// docShot saves a screenshot for docs/console.md: into artifacts/console
// as every screenshot, and into docs/console/ too when
// HOURGLASS_DOC_SHOTS=1 (how the pictures in the docs were taken).
func (tb *tab) docShot(name string) {
	tb.t.Helper()
	tb.screenshot(name)
	if os.Getenv("HOURGLASS_DOC_SHOTS") != "1" {
		return
	}
	src, err := os.ReadFile(filepath.Join(artifacts(tb.t), name+".png"))
	if err != nil {
		tb.t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), src, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// setValue sets an input's or a select's value as typing or choosing
// would, with its input and change events.
func (tb *tab) setValue(sel, v string) {
	tb.t.Helper()
	tb.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return e.value; })()`, sel, v))
}

// count evaluates a CSS selector's number of matches.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	n, err := strconv.Atoi(tb.eval(fmt.Sprintf(`String(document.querySelectorAll(%q).length)`, sel)))
	if err != nil {
		tb.t.Fatal(err)
	}
	return n
}

// waitCount waits until sel matches n elements.
func (tb *tab) waitCount(sel string, n int) {
	tb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for tb.count(sel) != n {
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s matches %d elements, want %d; status %s", sel, tb.count(sel), n, tb.status())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// page is the part of a listing the tests read.
type page struct {
	Items []struct {
		ID     string `json:"id"`
		Key    string `json:"key"`
		Reason string `json:"reason"`
	} `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// browseRig sends what the browse tests show: 55 pending messages of
// topic bulk; orders with three keyed and one unkeyed pending message;
// topic jobs with group workers holding 2 messages in flight; topic pay
// whose group billing (one attempt) has 4 dead letters and whose group
// audit got and acked them all. It returns the unkeyed message's ID.
func browseRig(t *testing.T, b *broker) string {
	t.Helper()
	var msgs []map[string]any
	for i := range 55 {
		msgs = append(msgs, map[string]any{"body": "b", "key": fmt.Sprintf("bulk-%02d", i), "delay": fmt.Sprintf("%dm", 60+i)})
	}
	b.call("POST", "/v1/topics/bulk/batch", map[string]any{"messages": msgs}, http.StatusOK, nil)
	for i, k := range []string{"order-1", "order-2", "order-3"} {
		b.call("POST", "/v1/topics/orders/messages", map[string]any{"key": k, "tag": "close", "body": "close " + k, "delay": fmt.Sprintf("%dm", 10+i)}, http.StatusOK, nil)
	}
	var unkeyed struct {
		ID string `json:"id"`
	}
	b.call("POST", "/v1/topics/orders/messages", map[string]any{"body": "no key at all", "delay": "20m"}, http.StatusOK, &unkeyed)

	b.call("PUT", "/v1/topics/jobs", map[string]any{"queues": 1}, http.StatusCreated, nil)
	b.call("PUT", "/v1/topics/jobs/groups/workers", map[string]any{}, http.StatusCreated, nil)
	b.call("PUT", "/v1/topics/pay", map[string]any{"queues": 1}, http.StatusCreated, nil)
	b.call("PUT", "/v1/topics/pay/groups/billing", map[string]any{"max_attempts": 1}, http.StatusCreated, nil)
	b.call("PUT", "/v1/topics/pay/groups/audit", map[string]any{}, http.StatusCreated, nil)
	for i := range 2 {
		b.call("POST", "/v1/topics/jobs/messages", map[string]any{"key": fmt.Sprint("job-", i), "body": "j"}, http.StatusOK, nil)
	}
	for i := range 4 {
		b.call("POST", "/v1/topics/pay/messages", map[string]any{"key": fmt.Sprint("pay-", i), "body": "p"}, http.StatusOK, nil)
	}
	receive := func(topic, group string, n int) []string {
		var receipts []string
		for deadline := time.Now().Add(10 * time.Second); len(receipts) < n && time.Now().Before(deadline); {
			var out struct {
				Messages []struct {
					Receipt string `json:"receipt"`
				} `json:"messages"`
			}
			b.call("POST", "/v1/topics/"+topic+"/groups/"+group+"/receive", map[string]any{"max": n - len(receipts), "invisible": "1h", "wait": "1s"}, http.StatusOK, &out)
			for _, m := range out.Messages {
				receipts = append(receipts, m.Receipt)
			}
		}
		if len(receipts) != n {
			t.Fatalf("%s/%s: received %d, want %d", topic, group, len(receipts), n)
		}
		return receipts
	}
	receive("jobs", "workers", 2)
	b.call("POST", "/v1/topics/pay/groups/audit/ack", map[string]any{"receipts": receive("pay", "audit", 4)}, http.StatusOK, nil)
	for _, r := range receive("pay", "billing", 4) {
		b.call("POST", "/v1/topics/pay/groups/billing/nack", map[string]any{"receipt": r}, http.StatusOK, nil)
	}
	for deadline := time.Now().Add(10 * time.Second); len(b.dead("pay", "billing").Items) < 4; {
		if time.Now().After(deadline) {
			t.Fatal("the 4 dead letters never showed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return unkeyed.ID
}

// dead lists a group's dead letters through the API.
func (b *broker) dead(topic, group string) page {
	b.t.Helper()
	var p page
	b.call("GET", "/v1/topics/"+url.PathEscape(topic)+"/groups/"+url.PathEscape(group)+"/dead", nil, http.StatusOK, &p)
	return p
}

// TestConsoleBrowseMessages: the Messages page lists pending messages by
// fire time with the unkeyed one reachable by its ID link, filters by
// key prefix, pages through 55 messages 50 at a time, and lists a group's
// messages in flight with attempt and lease end.
func TestConsoleBrowseMessages(t *testing.T) {
	needBrowser(t)
	b := startBroker(t, "")
	unkeyed := browseRig(t, b)

	tb := newTab(t)
	tb.do(chromedp.Navigate(b.base + "/ui/#/browse"))
	tb.waitCount("#br-table tbody tr[data-id]", 50) // 4 of orders first, then bulk
	first := tb.eval(`document.querySelector("#br-table tbody tr[data-id]").innerText`)
	if !strings.Contains(first, "order-1") || !strings.Contains(first, "pending") {
		t.Errorf("first row %q, want order-1 (due soonest), pending", first)
	}
	tb.waitText("#br-summary", "More after this page")
	tb.docShot("browse-pending")

	// Filters: key prefix, then a topic, with paging.
	tb.setValue("#br-key", "order-")
	tb.do(chromedp.Click("#br-form button[type=submit]"))
	tb.waitCount("#br-table tbody tr[data-id]", 3)
	tb.setValue("#br-key", "")
	tb.setValue("#br-topic", "bulk")
	tb.do(chromedp.Click("#br-form button[type=submit]"))
	tb.waitCount("#br-table tbody tr[data-id]", 50)
	tb.do(chromedp.Click("#br-next"))
	tb.waitCount("#br-table tbody tr[data-id]", 5)
	tb.waitText("#br-summary", "End of the list")
	if got := tb.eval(`document.querySelector("#br-table tbody tr[data-id]").innerText`); !strings.Contains(got, "bulk-50") {
		t.Errorf("second page starts with %q, want bulk-50", got)
	}
	tb.do(chromedp.Click("#br-first"))
	tb.waitText("#br-table tbody tr[data-id]", "bulk-00")

	// The unkeyed message, by its link.
	tb.setValue("#br-topic", "orders")
	tb.do(chromedp.Click("#br-form button[type=submit]"))
	tb.waitCount("#br-table tbody tr[data-id]", 4)
	tb.do(chromedp.Click(fmt.Sprintf(`#br-table a[href="#/message/%s"]`, unkeyed)))
	tb.waitText("#msg-id", unkeyed)
	tb.waitText("#msg-key", "–")
	tb.waitText("#msg-state", "pending")

	// Bad input: a due range backwards gets the broker's clear error.
	tb.do(chromedp.Navigate(b.base+"/ui/#/browse"), chromedp.WaitVisible("#br-from"))
	tb.setValue("#br-from", "2030-01-02 00:00")
	tb.setValue("#br-to", "2030-01-01 00:00")
	tb.do(chromedp.Click("#br-form button[type=submit]"))
	tb.waitText("#br-error", "Due to is not after due from")
	tb.setValue("#br-from", "tomorrowish")
	tb.do(chromedp.Click("#br-form button[type=submit]"))
	tb.waitText("#br-error", `Due from "tomorrowish" is not a time`)
	// A range that holds only the orders (due in 10 to 20 minutes).
	tb.setValue("#br-from", "5m")
	tb.setValue("#br-to", "30m")
	tb.do(chromedp.Click("#br-form button[type=submit]"))
	tb.waitCount("#br-table tbody tr[data-id]", 4)
	tb.setValue("#br-from", "")
	tb.setValue("#br-to", "")

	// In flight, per group.
	tb.do(chromedp.Click(`button[data-list="inflight"]`))
	tb.setValue("#br-group", "jobs\nworkers")
	tb.do(chromedp.Click("#br-form button[type=submit]"))
	tb.waitCount("#br-table tbody tr[data-id]", 2)
	row := tb.eval(`document.querySelector("#br-table tbody tr[data-id]").innerText`)
	if !strings.Contains(row, "job-0") || !strings.Contains(row, "\t1\t") {
		t.Errorf("in-flight row %q, want job-0 at attempt 1", row)
	}
	tb.docShot("browse-inflight")

	// A phone: the pages fit its width (the tables scroll inside them).
	tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, p := range []string{"#/browse/pending", "#/dead/pay/billing"} {
		tb.do(chromedp.Navigate(b.base + "/ui/" + p))
		tb.waitCount("tr[data-id]", 4) // orders, still the topic chosen; billing's 4 dead letters
		if w := tb.eval(`String(document.documentElement.scrollWidth)`); w != "390" {
			t.Errorf("%s at 390 px wide is %s px wide", p, w)
		}
	}
	tb.ev.checkClean(t, b.base)
}

// TestConsoleDeadLetters: the Dead letters page lists a group's dead
// letters with reason and attempts; resends one (after confirming) to
// that group only; a delete dismissed in the dialog changes nothing;
// deletes one; purges the rest; the broker agrees after each step.
func TestConsoleDeadLetters(t *testing.T) {
	needBrowser(t)
	b := startBroker(t, "")
	browseRig(t, b)
	dead := b.dead("pay", "billing")

	tb := newTab(t)
	// From Topics & groups: billing's dead-letter count links to its list.
	tb.do(chromedp.Navigate(b.base + "/ui/#/topics"))
	tb.waitText(`#groups-table tr[data-group="pay/billing"]`, "billing")
	tb.do(chromedp.Click(`#groups-table tr[data-group="pay/billing"] a.dead-link`))
	tb.waitCount("#dl-table tbody tr[data-id]", 4)
	if got := tb.eval(`document.querySelector("#dl-group").value`); got != "pay\nbilling" {
		t.Fatalf("the link opened the dead letters of %q", got)
	}
	tb.waitText("#dl-table tbody", "max-attempts")
	if got := tb.eval(`String(document.querySelector("#dl-resend").disabled)`); got != "true" {
		t.Errorf("Resend with nothing selected: disabled=%s", got)
	}
	tb.docShot("dead-letters")

	// Resend the first.
	tb.do(chromedp.Click(fmt.Sprintf(`#dl-table tr[data-id="%s"] input.dl-pick`, dead.Items[0].ID)), chromedp.Click("#dl-resend"), chromedp.WaitVisible("#confirm"))
	tb.waitText("#confirm-text", "Only this group receives them")
	tb.docShot("dead-letters-confirm")
	tb.do(chromedp.Click("#confirm-ok"))
	tb.waitText("#dl-result", "Resent 1 dead letter(s)")
	tb.waitCount("#dl-table tbody tr[data-id]", 3)
	var got struct {
		Messages []struct {
			Key        string            `json:"key"`
			Properties map[string]string `json:"properties"`
		} `json:"messages"`
	}
	b.call("POST", "/v1/topics/pay/groups/billing/receive", map[string]any{"max": 10, "wait": "5s"}, http.StatusOK, &got)
	if len(got.Messages) != 1 || got.Messages[0].Properties["hourglass-redriven-from"] != dead.Items[0].ID {
		t.Fatalf("billing got %+v after the resend", got.Messages)
	}
	var audit struct {
		Messages []any `json:"messages"`
	}
	b.call("POST", "/v1/topics/pay/groups/audit/receive", map[string]any{"max": 10}, http.StatusOK, &audit)
	if len(audit.Messages) != 0 {
		t.Fatalf("audit got %d messages: the resend reached another group", len(audit.Messages))
	}

	// A delete dismissed in the dialog: nothing changes. Delete is asked
	// again in the same task as the Back, so the first dialog's close
	// event arrives while the second question is open: it must not answer
	// that one.
	tb.do(chromedp.Click(fmt.Sprintf(`#dl-table tr[data-id="%s"] input.dl-pick`, dead.Items[1].ID)), chromedp.Click("#dl-delete"),
		chromedp.WaitVisible("#confirm"))
	tb.eval(`document.querySelector('#confirm button[value="cancel"]').click(); document.querySelector("#dl-delete").click(); "asked again"`)
	if n := len(b.dead("pay", "billing").Items); n != 3 {
		t.Fatalf("after a dismissed delete the broker lists %d dead letters, want 3", n)
	}
	// Confirmed, it goes.
	tb.do(chromedp.WaitVisible("#confirm"), chromedp.Click("#confirm-ok"))
	tb.waitText("#dl-result", "Deleted 1 dead letter(s)")
	tb.waitCount("#dl-table tbody tr[data-id]", 2)
	if left := b.dead("pay", "billing"); len(left.Items) != 2 || left.Items[0].ID != dead.Items[2].ID {
		t.Fatalf("after the delete the broker lists %+v", left.Items)
	}
	// Purge the rest.
	tb.do(chromedp.Click("#dl-purge"), chromedp.WaitVisible("#confirm"))
	tb.waitText("#confirm-text", "every dead letter of group billing")
	tb.do(chromedp.Click("#confirm-ok"))
	tb.waitText("#dl-result", "Purged 2 dead letter(s)")
	tb.waitText("#dl-table tbody", "has no dead letters")
	if left := b.dead("pay", "billing"); len(left.Items) != 0 {
		t.Fatalf("after the purge the broker lists %d", len(left.Items))
	}
	tb.dark(true)
	tb.docShot("dead-letters-empty-dark")
	tb.dark(false)
	tb.ev.checkClean(t, b.base)
}

// TestConsoleForecastLogScale: a herd of 3,000 in one minute beside 5 in
// the next. On the linear scale the 5 are a sliver (the least bar
// height); on the log scale their bar is at least a fifth of the herd's,
// and the chart says it is on a log scale.
func TestConsoleForecastLogScale(t *testing.T) {
	needBrowser(t)
	b := startBroker(t, "")
	minute := (time.Now().UnixMilli()/60_000 + 3) * 60_000
	for range 3 {
		var msgs []map[string]any
		for range 1000 {
			msgs = append(msgs, map[string]any{"body": "h", "at": minute + 30_000})
		}
		b.call("POST", "/v1/topics/herd/batch", map[string]any{"messages": msgs}, http.StatusOK, nil)
	}
	for i := range 5 {
		b.call("POST", "/v1/topics/herd/messages", map[string]any{"body": "n", "at": minute + 60_000 + int64(i)*1000}, http.StatusOK, nil)
	}
	tb := newTab(t)
	tb.do(chromedp.Navigate(b.base + "/ui/"))
	herd := fmt.Sprintf(`#forecast-chart rect.bar[data-start="%d"]`, minute)
	small := fmt.Sprintf(`#forecast-chart rect.bar[data-start="%d"]`, minute+60_000)
	tb.do(chromedp.WaitReady(herd), chromedp.WaitReady(small))
	ratio := func() float64 {
		f, err := strconv.ParseFloat(tb.eval(fmt.Sprintf(`String(document.querySelector(%q).getAttribute("height") / document.querySelector(%q).getAttribute("height"))`, small, herd)), 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if r := ratio(); r > 0.02 {
		t.Fatalf("linear: the 5 are %.3f of the herd's height, want a sliver", r)
	}
	tb.do(chromedp.Click("#fc-log"))
	tb.do(chromedp.WaitReady(`#forecast-chart svg[data-scale="log"]`))
	if r := ratio(); r < 0.2 {
		t.Fatalf("log scale: the 5 are %.3f of the herd's height, want at least 0.2", r)
	}
	if got := tb.eval(fmt.Sprintf(`document.querySelector(%q).getAttribute("data-count")`, herd)); got != "3000" {
		t.Errorf("the herd's bar counts %s, want 3000 on either scale", got)
	}
	if label := tb.eval(`document.querySelector("#forecast-chart svg").getAttribute("aria-label")`); !strings.Contains(label, "log scale") {
		t.Errorf("chart label %q does not say log scale", label)
	}
	tb.docShot("forecast-log")
	tb.ev.checkClean(t, b.base)
}
