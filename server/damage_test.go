package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/commitlog/commitlogtest"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestDamageOverHTTP is issue 29's defect 1 as an operator and a consumer
// see it: 4 bytes overwritten inside a message record of a sealed segment.
// After a scrub pass /healthz answers 200 "degraded" naming the segment and
// position, and GET /v1/admin/damage lists the range; a group's receive
// that meets the record answers 500 data_loss naming its position, the
// next receives get every other message, and the damage report lists the
// message set aside.
func TestDamageOverHTTP(t *testing.T) {
	eng, srv, pos, seg := damagedBroker(t, func(eo *engine.Options) {
		eo.ScrubRate = 1 << 40
		eo.ScrubDelay = time.Hour // the passes are the test's own (ScrubNow)
	})
	if err := eng.ScrubNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, h := getHealth(t, srv.URL)
	if code != 200 || h.Status != "degraded" || len(h.Problems) != 1 || !strings.Contains(h.Problems[0], seg) ||
		!strings.Contains(h.Problems[0], fmt.Sprintf("at position %d", pos)) {
		t.Fatalf("healthz over damage: %d %+v", code, h)
	}
	var d api.Damage
	getJSON(t, srv.URL+"/v1/admin/damage", &d)
	if len(d.Ranges) != 1 || d.Ranges[0].Pos != pos || d.Ranges[0].Segment != "log/"+seg || d.Scrub.Passes != 1 || d.Scrub.LastPassTime == "" {
		t.Fatalf("damage report: %+v", d)
	}

	got, losses := 0, 0
	for i := 0; i < 100; i++ {
		resp, err := http.Post(srv.URL+"/v1/topics/t/groups/g/receive", "application/json", strings.NewReader(`{"max":8,"invisible":"1h"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 500 {
			var e api.Error
			if json.Unmarshal(body, &e) != nil || e.Error.Code != "data_loss" || !strings.Contains(e.Error.Message, fmt.Sprintf("log position %d", pos)) {
				t.Fatalf("500 that is not data_loss naming %d: %s", pos, body)
			}
			losses++
			continue
		}
		var rr api.ReceiveResponse
		if resp.StatusCode != 200 || json.Unmarshal(body, &rr) != nil {
			t.Fatalf("receive: %d %s", resp.StatusCode, body)
		}
		if len(rr.Messages) == 0 {
			break
		}
		got += len(rr.Messages)
	}
	if got != 59 || losses != 1 {
		t.Fatalf("received %d of 60 with %d data_loss, want 59 and 1", got, losses)
	}
	getJSON(t, srv.URL+"/v1/admin/damage", &d)
	if d.SetAsideTotal != 1 || d.SetAside[0].Pos != pos || d.SetAside[0].Group != "g" || d.SetAside[0].Segment != "log/"+seg {
		t.Fatalf("damage report after the receive: %+v", d)
	}
}

// damageSealed overwrites 4 bytes inside the n-th message record of the
// first segment of the log in dir and returns its position and segment.
func damageSealed(t *testing.T, fs vfs.FS, dir string, n int) (uint64, string) {
	t.Helper()
	pos, seg, err := commitlogtest.DamageSealed(fs, dir, 1, n, 20, []byte{0xde, 0xad, 0xbe, 0xef})
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return uint64(pos), seg
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if resp.StatusCode != 200 || dec.Decode(out) != nil {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}

// TestServeScrubsSoonAfterStart: with serve's own settings (the first scrub
// pass a second after the start), a broker opened on a log with a damaged
// sealed segment says so in /healthz within seconds, before any consumer
// reads the topic and without an operator asking for a pass. At def821c it
// answered ok until a consumer met the damage.
func TestServeScrubsSoonAfterStart(t *testing.T) {
	eng, srv, _, seg := damagedBroker(t, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, h := getHealth(t, srv.URL)
		if code == 200 && h.Status == "degraded" && len(h.Problems) == 1 && strings.Contains(h.Problems[0], seg) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz 30 s after a start on a damaged log: %d %+v (scrub %+v)", code, h, eng.Scrub())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// damagedBroker fills a broker's log with 60 visible messages in 4 KiB
// segments, closes it, overwrites 4 bytes of the ninth sealed record
// (damageSealed), and opens it again behind an HTTP server, with serve's
// default settings changed by edit. It returns the damaged position and
// segment; the broker and server close with the test.
func damagedBroker(t *testing.T, edit func(*engine.Options)) (*engine.Engine, *httptest.Server, uint64, string) {
	t.Helper()
	fs := vfs.NewMem()
	cfg := DefaultOptions()
	cfg.DataDir = "/data"
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eo := serveEngineOptions(cfg.DataDir, logger)
	eo.FS, eo.SegmentBytes = fs, 4096
	if edit != nil {
		edit(&eo)
	}
	eng, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		if _, err := eng.Send(context.Background(), message.Message{Topic: "t", Body: []byte(fmt.Sprintf("body %d", i))}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every message visible before the close: one still pending at the
	// close's checkpoint could be compacted forward (a moved copy), and
	// the damage would miss the copy that is read.
	for deadline := time.Now().Add(10 * time.Second); eng.Stats().Fired.Load() < 60 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	pos, seg := damageSealed(t, fs, "/data/log", 9)
	eng, err = engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	srv := httptest.NewServer(New(eng, cfg, logger, nil))
	t.Cleanup(srv.Close)
	return eng, srv, pos, seg
}
