package broker

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/access/accesstest"
)

// TestScheduleSendsAsItsCreator: admin on a schedule is not a way to send
// where the principal may not: creating a schedule needs send on its
// topic too, refused like a send (and before the topic is looked up).
func TestScheduleSendsAsItsCreator(t *testing.T) {
	creds, secrets := accesstest.Write(t, t.TempDir(), map[string][]string{
		"planner": {"admin:schedule/*", "send:reports"},
	})
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.GRPCListen, cfg.RemotingListen = t.TempDir(), "127.0.0.1:0", "", ""
	cfg.Credentials = creds
	ctx, cancel := context.WithCancel(context.Background())
	base, runErr := startRun(ctx, t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Error(err)
		}
	}()
	put := func(topic string) (int, string) {
		req, _ := http.NewRequest("PUT", base+"/v1/schedules/s-"+topic, strings.NewReader(`{"topic":"`+topic+`","cron":"@daily","body":"x"}`))
		req.Header.Set("Authorization", "Bearer planner:"+secrets["planner"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := put("payroll"); status != 403 || !strings.Contains(body, `planner\" may not send payroll`) {
		t.Fatalf("a schedule to a topic the planner may not send to: %d %s", status, body)
	}
	if status, body := put("reports"); status != 201 {
		t.Fatalf("a schedule to a topic the planner may send to: %d %s", status, body)
	}
}
