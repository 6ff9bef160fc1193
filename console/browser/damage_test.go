package browser_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hourglass-mq/hourglass/commitlog/commitlogtest"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// damagedDir makes a data directory of 60 visible messages in small log
// segments, overwrites 4 bytes inside the 10th message's record (in a
// sealed segment), and returns the directory and the record's position.
func damagedDir(t *testing.T) (string, uint64) {
	t.Helper()
	dir := t.TempDir()
	e, err := engine.Open(engine.Options{Dir: dir, SegmentBytes: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if _, err := e.Send(context.Background(), message.Message{Topic: "orders", Body: []byte(fmt.Sprintf("order %d", i))}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every message visible before the close: one still pending at the
	// close's checkpoint could be compacted forward (a moved copy), and
	// the damage would miss the copy that is read.
	for deadline := time.Now().Add(10 * time.Second); e.Stats().Fired.Load() < 60 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	target, _, err := commitlogtest.DamageSealed(vfs.OS, filepath.Join(dir, "log"), 1, 9, 20, []byte{0xde, 0xad, 0xbe, 0xef})
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return dir, uint64(target)
}

// TestConsoleShowsDamage: a group meets a damaged record (answered 500
// data_loss once), and the console's overview, where an operator looks
// first, shows the broker degraded, the problem, and the message set aside
// with its position, topic and group.
func TestConsoleShowsDamage(t *testing.T) {
	needBrowser(t)
	dir, pos := damagedDir(t)
	b := startBrokerOn(t, "", dir)
	losses := 0
	for i := 0; i < 100; i++ {
		resp, err := http.Post(b.base+"/v1/topics/orders/groups/billing/receive", "application/json", strings.NewReader(`{"max":16,"invisible":"1h"}`))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 500 && strings.Contains(string(data), `"data_loss"`) {
			losses++
			continue
		}
		if resp.StatusCode != 200 {
			t.Fatalf("receive: %d %s", resp.StatusCode, data)
		}
		if strings.Contains(string(data), `"messages":[]`) {
			break
		}
	}
	if losses != 1 {
		t.Fatalf("data_loss answered %d times, want once", losses)
	}

	tb := newTab(t)
	tb.do(chromedp.Navigate(b.base + "/ui/"))
	tb.waitText("#health-status", "degraded")
	tb.waitText("#health-problems", fmt.Sprintf("at position %d", pos))
	tb.waitText("#damage-table", fmt.Sprintf("%d", pos))
	tb.waitText("#damage-table", "topic orders, group billing")
	tb.waitText("#m-scrub-sub", "1 set aside")
	tb.screenshot("damage-light")
	tb.ev.checkClean(t, b.base)
}
