// Package grafana holds the Grafana dashboard of the broker
// (hourglass.json, import it into Grafana over a Prometheus data source
// that scrapes /metrics). Its test keeps the dashboard honest: every
// metric a panel queries is served by a running broker.
package grafana_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/broker"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/metrics"
	"github.com/hourglass-mq/hourglass/server"
	"github.com/hourglass-mq/hourglass/vfs"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			X, Y, W, H int
		} `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// selector finds metric names in PromQL: a name followed by its label
// matchers. Every query of the dashboard selects with {job=~"$job"}, so
// every metric it names is followed by "{".
var selector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{`)

// scrapedNames runs a broker (the HTTP handler `hourglass serve` runs,
// with its metrics registry), gives it a topic, a group and messages so
// that the per-topic and per-group series exist, and returns the names of
// the series /metrics serves.
func scrapedNames(t *testing.T) map[string]bool {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.DataDir = "/data"
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eo := cfg.EngineOptions(logger)
	eo.FS = vfs.NewMem()
	eng, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	h := server.New(eng, cfg.ServerOptions(), logger, metrics.Handler(eng))
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Drain()
		srv.Close()
		eng.Close()
	})
	ctx := context.Background()
	if _, err := eng.Send(ctx, message.Message{Topic: "orders", Body: []byte("x")}, message.When{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := eng.CreateGroup("orders", "billing", engine.GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		names[name] = true
	}
	return names
}

// TestDashboardMetricsExist: every metric a panel or a variable of
// hourglass.json queries is served by a running broker, and the panels
// are laid out on Grafana's 24-column grid with unique ids.
func TestDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile("hourglass.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("hourglass.json: %v", err)
	}
	served := scrapedNames(t)
	if !served["hourglass_messages_pending"] {
		t.Fatalf("the broker's /metrics lacks hourglass_messages_pending: the scrape is broken")
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W < 1 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q does not fit the 24-column grid: %+v", p.Title, p.GridPos)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			found := selector.FindAllStringSubmatch(q.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: query %q selects no metric with {job=~\"$job\"}", p.Title, q.Expr)
			}
			for _, m := range found {
				used[m[1]] = true
			}
			if !strings.Contains(q.Expr, `job=~"$job"`) {
				t.Errorf("panel %q: query %q ignores the job variable", p.Title, q.Expr)
			}
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			if m := regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`).FindStringSubmatch(q); m != nil {
				used[m[1]] = true
			}
		}
	}
	if len(used) < 20 {
		t.Fatalf("only %d metrics found in the dashboard: the parser is broken", len(used))
	}
	for name := range used {
		if !served[name] {
			t.Errorf("the dashboard queries %s, which a running broker does not serve", name)
		}
	}
}
