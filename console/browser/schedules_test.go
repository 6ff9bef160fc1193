package browser_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleSchedules: the Schedules page lists a schedule with its next
// fire times in its own zone (Asia/Tokyo, +09:00, whatever the browser's
// zone), shows its latest firings with what became of them (delivered and
// sent ahead), pauses it (the firings sent ahead become cancelled),
// resumes it and deletes it, each checked against the broker.
func TestConsoleSchedules(t *testing.T) {
	needBrowser(t)
	b := startBroker(t, "")
	b.call("PUT", "/v1/schedules/tick", map[string]any{"topic": "ticks", "cron": "@every 2s", "tz": "Asia/Tokyo", "body": "tick"}, http.StatusCreated, nil)
	tb := newTab(t)
	tb.do(chromedp.Navigate(b.base+"/ui/#/schedules"), chromedp.WaitVisible("#schedules-table"))
	tb.waitText(`#schedules-table tr[data-schedule="tick"]`, "@every 2s in Asia/Tokyo")
	tb.waitText(`#schedules-table tr[data-schedule="tick"] td.next`, "+09:00")
	tb.do(chromedp.Click(`#schedules-table tr[data-schedule="tick"] button:nth-of-type(2)`))
	tb.waitText("#firings-id", "tick (Asia/Tokyo)")
	tb.waitText("#firings-table", "sent ahead")
	tb.waitText("#firings-table", "visible") // a firing whose time came (the page polls)
	tb.docShot("schedules")

	tb.do(chromedp.Click(`#schedules-table tr[data-schedule="tick"] button:nth-of-type(1)`), chromedp.WaitVisible("#confirm"))
	tb.waitText("#confirm-text", "firings already sent ahead are cancelled")
	tb.do(chromedp.Click("#confirm-ok"))
	tb.waitText("#schedules-result", "Schedule tick is paused.")
	tb.waitText(`#schedules-table tr[data-schedule="tick"]`, "paused")
	tb.waitText("#firings-table", "cancelled")
	var s struct {
		State string `json:"state"`
	}
	b.call("GET", "/v1/schedules/tick", nil, http.StatusOK, &s)
	if s.State != "paused" {
		t.Fatalf("the broker's schedule is %s", s.State)
	}
	tb.do(chromedp.Click(`#schedules-table tr[data-schedule="tick"] button:nth-of-type(1)`))
	tb.waitText("#schedules-result", "Schedule tick is active. Next: ")
	tb.do(chromedp.Click(`#schedules-table tr[data-schedule="tick"] button:nth-of-type(3)`), chromedp.WaitVisible("#confirm"))
	tb.waitText("#confirm-text", "Delete schedule tick")
	tb.do(chromedp.Click("#confirm-ok"))
	tb.waitText("#schedules-result", "Schedule tick is deleted.")
	tb.waitText("#schedules-table", "No schedules yet")
	b.call("GET", "/v1/schedules", nil, http.StatusOK, nil)
	tb.ev.checkClean(t, b.base)
}
