package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// TestForecastEndpoint: messages in three minutes show in their buckets,
// a cancel leaves its bucket, defaults apply, and bad queries are 400
// with the error shape.
func TestForecastEndpoint(t *testing.T) {
	ts := newTestServer(t, withFakeClock(fakeClock()))
	var ids []string
	for m, n := range []int{1, 2, 3} {
		for i := 0; i < n; i++ {
			var rc api.Receipt
			ts.call("POST", "/v1/topics/orders/messages", map[string]any{"body": "x", "at": t0 + int64(m+1)*60_000 + 5000}, http.StatusOK, &rc)
			ids = append(ids, rc.ID)
		}
	}
	ts.call("POST", "/v1/topics/other/messages", map[string]any{"body": "x", "at": t0 + 90_000}, http.StatusOK, nil)
	ts.call("DELETE", "/v1/messages/"+ids[5], nil, http.StatusOK, nil)

	var f api.Forecast
	ts.call("GET", "/v1/forecast?topic=orders&step=minute&from="+strconv.Itoa(t0)+"&to="+strconv.Itoa(t0+5*60_000), nil, http.StatusOK, &f)
	want := []int64{0, 1, 2, 2, 0}
	if len(f.Buckets) != len(want) || f.Total != 5 || f.StepSeconds != 60 || f.From != t0 || f.To != t0+5*60_000 {
		t.Fatalf("forecast %+v", f)
	}
	for i, b := range f.Buckets {
		if b.Count != want[i] || b.Start != api.Millis(t0+int64(i)*60_000) || b.StartTime != b.Start.RFC3339() {
			t.Fatalf("bucket %d: %+v, want count %d", i, b, want[i])
		}
	}
	// Defaults: all topics, from now, one hour by the minute.
	ts.call("GET", "/v1/forecast", nil, http.StatusOK, &f)
	if len(f.Buckets) != 60 || f.Total != 6 || f.Buckets[1].Count != 2 || f.Topic != "" {
		t.Fatalf("default forecast: %d buckets, total %d, %+v", len(f.Buckets), f.Total, f.Buckets[:3])
	}
	for _, q := range []string{
		"step=500ms", "step=fortnight", "step=0s", "step=", "topic=nosuch%zz", "step=%zz", "from=abc", "from=-5", "to=" + strconv.Itoa(t0),
		"step=second&to=" + strconv.Itoa(t0+3*3600_000), "bogus=1", "step=1m&step=1h", "topic=..",
	} {
		r := ts.do("GET", "/v1/forecast?"+q, nil)
		ts.wantError(r, http.StatusBadRequest, "invalid_argument")
	}
	r := ts.do("GET", "/v1/forecast?topic=nope", nil)
	ts.wantError(r, http.StatusNotFound, "not_found")
	// Other /v1 routes still refuse a query.
	r = ts.do("GET", "/v1/stats?x=1", nil)
	ts.wantError(r, http.StatusBadRequest, "invalid_argument")
}

// TestPreviewEndpoint: text bodies come back as text, binary ones as
// base64 only, and long ones truncated without a broken character.
func TestPreviewEndpoint(t *testing.T) {
	ts := newTestServer(t)
	send := func(m map[string]any) string {
		var rc api.Receipt
		ts.call("POST", "/v1/topics/t/messages", m, http.StatusOK, &rc)
		return rc.ID
	}
	var p api.BodyPreview
	ts.call("GET", "/v1/messages/"+send(map[string]any{"body": "héllo", "delay": "1h"})+"/preview", nil, http.StatusOK, &p)
	if p.Text == nil || *p.Text != "héllo" || p.Truncated || p.BodyBytes != 6 || p.Base64 != "aMOpbGxv" {
		t.Fatalf("text preview %+v", p)
	}
	ts.call("GET", "/v1/messages/"+send(map[string]any{"body_base64": "/wD+"})+"/preview", nil, http.StatusOK, &p)
	if p.Text != nil || p.Base64 != "/wD+" {
		t.Fatalf("binary preview %+v", p)
	}
	long := strings.Repeat("a", api.MaxPreviewBytes-1) + "é and more"
	ts.call("GET", "/v1/messages/"+send(map[string]any{"body": long})+"/preview", nil, http.StatusOK, &p)
	if p.Text == nil || len(*p.Text) != api.MaxPreviewBytes-1 || !p.Truncated || p.BodyBytes != len(long) {
		t.Fatalf("long preview: truncated %v, %d bytes of text", p.Truncated, len(*p.Text))
	}
	r := ts.do("GET", "/v1/messages/00000000000000000000000000000000/preview", nil)
	ts.wantError(r, http.StatusNotFound, "not_found")
}
