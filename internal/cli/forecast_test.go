package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
)

// TestForecastDrawsBars: the command asks for whole buckets from the
// current step, draws bars scaled to the largest bucket, marks a herd, and
// --json prints the answer as it came.
func TestForecastDrawsBars(t *testing.T) {
	from := now.Truncate(time.Minute).UnixMilli()
	counts := []int64{0, 10, 5000, 20, 0, 0}
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		f := api.Forecast{Topic: "orders", From: api.Millis(from), To: api.Millis(from + 6*60_000), StepSeconds: 60}
		for i, c := range counts {
			s := api.Millis(from + int64(i)*60_000)
			f.Buckets = append(f.Buckets, api.ForecastBucket{Start: s, End: s + 60_000, StartTime: s.RFC3339(), Count: c})
			f.Total += c
		}
		json.NewEncoder(w).Encode(f)
	}))
	defer srv.Close()
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": srv.URL})
	res := r.run("forecast", "--topic", "orders", "--for", "6m", "--width", "8")
	res.wantCode(t, ExitOK)
	wantQuery := "from=" + itoa(from) + "&step=1m&to=" + itoa(from+6*60_000) + "&topic=orders"
	if query != wantQuery {
		t.Errorf("query %q, want %q", query, wantQuery)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 7 || !strings.Contains(lines[0], "topic orders: 5030 messages due") {
		t.Fatalf("output:\n%s", res.stdout)
	}
	for i, want := range []string{
		time.UnixMilli(from).Format("15:04") + "          0",
		time.UnixMilli(from+60_000).Format("15:04") + " ▏        10",
		time.UnixMilli(from+120_000).Format("15:04") + " ████████ 5000  <- herd",
		time.UnixMilli(from+180_000).Format("15:04") + " ▏        20",
	} {
		if lines[i+1] != want {
			t.Errorf("line %d %q, want %q", i+1, lines[i+1], want)
		}
	}
	res = r.run("forecast", "--json")
	res.wantCode(t, ExitOK)
	var f api.Forecast
	if err := json.Unmarshal([]byte(res.stdout), &f); err != nil || f.Total != 5030 {
		t.Fatalf("--json: %v %+v", err, f)
	}
	for _, bad := range [][]string{{"--step", "500ms"}, {"--for", "0s"}, {"--step", "1s", "--for", "30h"}, {"--width", "0"}, {"extra"}} {
		r.run(append([]string{"forecast"}, bad...)...).wantCode(t, ExitUsage)
	}
}
