package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// tab is one browser tab with its event record.
type tab struct {
	t   testing.TB
	ctx context.Context
	ev  *events
}

// newTab starts a headless Chromium with a fresh profile and the flags
// this machine needs (no sandbox as root, no GPU, nothing that phones
// home), opens a tab at 1280x800 and records its requests and errors.
func newTab(t testing.TB) *tab {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// Numbers are grouped as in en-US whatever the machine's locale,
		// so the tests can read "1,000,000".
		chromedp.Flag("lang", "en-US"),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser and the tab
		t.Fatalf("start chromium: %v", err)
	}
	ev := &events{}
	err := chromedp.Listen(ctx, func(e any) {
		switch e := e.(type) {
		case *network.EventRequestWillBeSent:
			ev.add(&ev.requests, e.Request.URL)
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			ev.add(&ev.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				ev.add(&ev.errors, "console."+string(e.Type)+": "+strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			if e.Entry.Level != log.EntryLevelError {
				return
			}
			if e.Entry.Source == log.EntrySourceNetwork && strings.Contains(e.Entry.Text, "401") {
				ev.add(&ev.refused, e.Entry.Text+" "+e.Entry.URL)
				return
			}
			ev.add(&ev.errors, fmt.Sprintf("log %s: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	tb := &tab{t: t, ctx: ctx, ev: ev}
	tb.do(chromedp.EmulateViewport(1280, 800))
	return tb
}

// do runs actions with a bound on how long they may take.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("browser: %v\npage status: %s", err, tb.status())
	}
}

// status is the console's status line, for failure messages.
func (tb *tab) status() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("#status")||{}).textContent||""`))
	return s
}

func (tb *tab) eval(expr string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// waitText waits until the element's text contains want.
func (tb *tab) waitText(sel, want string) {
	tb.t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want)
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		got := tb.eval(fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||"(no element)"`, sel))
		tb.t.Fatalf("%s never contained %q (it holds %q): %v; status %s", sel, want, got, err, tb.status())
	}
}

// dark switches the page between the light and the dark colour scheme,
// as the operating system's setting would.
func (tb *tab) dark(on bool) {
	tb.t.Helper()
	v := "light"
	if on {
		v = "dark"
	}
	tb.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}})
		return err
	}))
	if got := tb.eval(`matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"`); got != v {
		tb.t.Fatalf("colour scheme %s, want %s", got, v)
	}
}

// screenshot saves the viewport as artifacts/console/<name>.png.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(artifacts(tb.t), name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// TestConsoleForecastFindCancelReschedule schedules messages into three
// future minutes and reads their counts off the forecast chart; finds a
// message by key, cancels it and asks the broker; reschedules another and
// checks its new due time; checks that the page fits a phone's width; and
// checks that no request left the broker's origin and nothing logged an
// error.
func TestConsoleForecastFindCancelReschedule(t *testing.T) {
	needBrowser(t)
	b := startBroker(t, "")
	want := sendConsoleMessages(b)

	tb := newTab(t)
	tb.do(chromedp.Navigate(b.base + "/ui/"))
	tb.waitText("#m-pending", "12")
	tb.waitText("#m-pending-sub", "1h 10,")
	checkForecast(t, tb, want)

	// Find order-1 by topic and key, with the keyboard (Enter submits).
	tb.do(chromedp.Navigate(b.base+"/ui/#/find"), chromedp.WaitVisible("#find-topic"),
		chromedp.SendKeys("#find-topic", "orders"), chromedp.SendKeys("#find-key-input", "order-1"+kb.Enter))
	tb.waitText("#msg-state", "pending")
	tb.waitText("#msg-props", "c-42")
	tb.waitText("#msg-body", "close unpaid order 1")
	tb.waitText("#msg-countdown", "in 1h 29m")
	tb.screenshot("message-light")
	tb.do(chromedp.Click("#msg-cancel"), chromedp.WaitVisible("#confirm"))
	tb.waitText("#confirm-text", "never be delivered")
	tb.do(chromedp.Click("#confirm-ok"))
	tb.waitText("#msg-state", "cancelled")
	if got := b.inspectKey("orders", "order-1"); got.State != "cancelled" {
		t.Fatalf("the broker says order-1 is %s after the console cancelled it", got.State)
	}

	// Reschedule order-2 (a binary body: shown in hex) by three hours.
	before := b.inspectKey("orders", "order-2")
	tb.do(chromedp.SetValue("#find-key-input", "order-2"), chromedp.Click("#find-key button"))
	tb.waitText("#msg-key", "order-2")
	tb.waitText("#msg-body", "00 01 02 03 ff")
	clicked := time.Now().UnixMilli()
	tb.do(chromedp.SendKeys("#msg-when", "3h"), chromedp.Click("#msg-reschedule"), chromedp.WaitVisible("#confirm"), chromedp.Click("#confirm-ok"))
	tb.waitText("#msg-action-result", "Rescheduled to")
	after := b.inspectKey("orders", "order-2")
	lo, hi := clicked+3*3600_000-1000, time.Now().UnixMilli()+3*3600_000
	if after.State != "pending" || after.Due == before.Due || after.Due < lo || after.Due > hi {
		t.Fatalf("after rescheduling by 3h: %+v (before: due %d); want pending, due in [%d, %d]", after, before.Due, lo, hi)
	}

	// Topics and groups.
	tb.do(chromedp.Navigate(b.base + "/ui/#/topics"))
	tb.waitText(`#topics-table tr[data-topic="orders"]`, "orders")
	tb.waitText(`#groups-table tr[data-group="orders/billing"]`, "billing")
	// billing has never dead-lettered anything: its Redrive is disabled.
	if got := tb.eval(`String(document.querySelector('#groups-table tr[data-group="orders/billing"] button').disabled)`); got != "true" {
		t.Errorf("Redrive of a group with 0 dead letters: disabled=%s, want true", got)
	}
	tb.screenshot("topics-light")

	checkDarkAndPhone(t, tb, b, after.ID)

	tb.ev.checkClean(t, b.base)
	if _, _, refused := tb.ev.snapshot(); len(refused) > 0 {
		t.Errorf("requests refused without a token configured: %v", refused)
	}
}

// sendConsoleMessages sends 3, 5 and 2 messages due in three future
// minutes, order-1 (with a property) and order-2 (a binary body) due in
// 90 and 100 minutes, and creates group billing. It returns the count due
// in each minute, by its start (Unix ms).
func sendConsoleMessages(b *broker) map[int64]int {
	// Three future minutes, counted from the next whole minute plus one so
	// that none falls due while the test runs.
	minute := (time.Now().UnixMilli()/60_000 + 2) * 60_000
	want := map[int64]int{minute: 3, minute + 60_000: 5, minute + 120_000: 2}
	for start, n := range want {
		for i := 0; i < n; i++ {
			b.call("POST", "/v1/topics/orders/messages", map[string]any{"body": "tick", "at": start + 15_000 + int64(i)*1000}, http.StatusOK, nil)
		}
	}
	b.call("POST", "/v1/topics/orders/messages", map[string]any{"key": "order-1", "body": "close unpaid order 1",
		"delay": "90m", "properties": map[string]string{"customer": "c-42"}}, http.StatusOK, nil)
	b.call("POST", "/v1/topics/orders/messages", map[string]any{"key": "order-2", "body_base64": "AAECA/8=", "delay": "100m"}, http.StatusOK, nil)
	b.call("PUT", "/v1/topics/orders/groups/billing", map[string]any{}, http.StatusCreated, nil)
	return want
}

// checkForecast checks the overview: disk use shown, the next hour's 60
// bars with the three minutes' counts, and the week's 168 hourly bars
// adding up to the 12 pending messages.
func checkForecast(t *testing.T, tb *tab, want map[int64]int) {
	t.Helper()
	if d := tb.eval(`document.querySelector("#m-disk").textContent`); d == "0 B" || d == "–" {
		t.Errorf("disk use shows %q", d)
	}
	for start, n := range want {
		sel := fmt.Sprintf(`#forecast-chart rect.bar[data-start="%d"]`, start)
		tb.do(chromedp.WaitReady(sel))
		got := tb.eval(fmt.Sprintf(`document.querySelector(%q).getAttribute("data-count")`, sel))
		if got != strconv.Itoa(n) {
			t.Errorf("forecast bar at %s shows %s, want %d", time.UnixMilli(start).UTC().Format(time.TimeOnly), got, n)
		}
	}
	if got := tb.eval(`String(document.querySelectorAll("#forecast-chart rect.bar").length)`); got != "60" {
		t.Errorf("the next hour has %s bars, want 60", got)
	}
	tb.screenshot("overview-light")
	// The week by the hour: the three minutes fall into one or two hours.
	tb.do(chromedp.Click(`button[data-range="week"]`))
	tb.waitText("#fc-summary", "in the next week")
	if got := tb.eval(`String(document.querySelectorAll("#forecast-chart rect.bar").length)`); got != "168" {
		t.Errorf("the next week has %s bars, want 168", got)
	}
	if got := tb.eval(`String([...document.querySelectorAll("#forecast-chart rect.bar")].reduce((n, r) => n + Number(r.dataset.count), 0))`); got != "12" {
		t.Errorf("the week's bars add up to %s, want 12", got)
	}
	tb.do(chromedp.Click(`button[data-range="hour"]`))
}

// checkDarkAndPhone checks dark mode on every page (screenshots of each)
// and that on a phone nothing is wider than the screen; id is order-2's.
func checkDarkAndPhone(t *testing.T, tb *tab, b *broker, id string) {
	t.Helper()
	// Dark mode, every page.
	tb.dark(true)
	if bg := tb.eval(`getComputedStyle(document.body).backgroundColor`); bg == "rgb(255, 255, 255)" {
		t.Errorf("dark mode left the background white")
	}
	tb.screenshot("topics-dark")
	tb.do(chromedp.Navigate(b.base + "/ui/#/overview"))
	tb.waitText("#m-pending", "11")
	tb.screenshot("overview-dark")
	tb.do(chromedp.Navigate(b.base + "/ui/#/message/" + id))
	tb.waitText("#msg-key", "order-2")
	tb.screenshot("message-dark")
	tb.dark(false)

	// A phone: nothing wider than the screen.
	tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(b.base+"/ui/#/overview"))
	tb.waitText("#m-pending", "11")
	if w := tb.eval(`String(document.documentElement.scrollWidth)`); w != "390" {
		t.Errorf("at 390 px wide the page is %s px wide", w)
	}
	tb.screenshot("overview-phone")
}

// TestConsoleNeedsToken: with a token on the broker, the console without
// it shows the sign-in form and nothing else, and a call from the page
// without it (or with a wrong one) is refused; with it, the data shows.
func TestConsoleNeedsToken(t *testing.T) {
	needBrowser(t)
	b := startBroker(t, "tok-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	b.call("POST", "/v1/topics/payroll/messages", map[string]any{"key": "salary-7", "body": "secret", "delay": "1h"}, http.StatusOK, nil)

	tb := newTab(t)
	tb.do(chromedp.Navigate(b.base+"/ui/"), chromedp.WaitVisible("#login-token"))
	for _, sel := range []string{"#page-overview", "#page-topics", "#page-find", "#nav"} {
		if tb.eval(fmt.Sprintf(`String(document.querySelector(%q).hidden)`, sel)) != "true" {
			t.Errorf("%s is shown without the token", sel)
		}
	}
	if txt := tb.eval(`document.body.innerText`); strings.Contains(txt, "payroll") || strings.Contains(txt, "salary") {
		t.Errorf("the page shows data without the token:\n%s", txt)
	}
	for _, call := range []string{
		`fetch("/v1/stats").then(r => String(r.status))`,
		`fetch("/v1/topics/payroll/keys/salary-7", {headers: {Authorization: "Bearer wrong"}}).then(r => String(r.status))`,
		`fetch("/v1/topics/payroll/messages", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{\"body\":\"x\"}"}).then(r => String(r.status))`,
	} {
		if got := tb.eval(call); got != "401" {
			t.Errorf("%s answered %s, want 401", call, got)
		}
	}
	tb.screenshot("login-light")
	tb.dark(true)
	tb.screenshot("login-dark")
	tb.dark(false)

	// A wrong token is refused and says so; the right one opens the console.
	tb.do(chromedp.SendKeys("#login-token", "nope"+kb.Enter))
	tb.waitText("#login-error", "refused the token")
	tb.do(chromedp.SendKeys("#login-token", b.token+kb.Enter))
	tb.waitText("#m-pending", "1")
	tb.do(chromedp.WaitVisible("#nav"))
	if got := tb.eval(`sessionStorage.getItem("hourglass.token")`); got != b.token {
		t.Errorf("sessionStorage holds %q", got)
	}
	tb.ev.checkClean(t, b.base)
	if _, _, refused := tb.ev.snapshot(); len(refused) == 0 {
		t.Error("the browser logged no refused (401) request: the calls without the token did not reach the broker")
	}
}
