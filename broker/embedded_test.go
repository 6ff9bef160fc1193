package broker

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// TestBackupCarriesBrokerState: a backup taken through the HTTP API of an
// embedded broker on the virtual clock carries what the broker writes
// beside the engine (stateFiles): the schedules' journal as it was,
// and the virtual-clock marker, so that a restore keeps its schedules and
// stays tied to its clock mode.
func TestBackupCarriesBrokerState(t *testing.T) {
	root := t.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Clock, cfg.BackupDir = filepath.Join(root, "data"), api.ClockVirtual, filepath.Join(root, "backups")
	if err := os.Mkdir(cfg.BackupDir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := OpenEmbedded(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler)
	defer func() {
		srv.Close()
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	call := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return out
	}
	call("PUT", "/v1/schedules/s", `{"topic":"t","cron":"* * * * *"}`)
	var res api.BackupResult
	dir := filepath.Join(cfg.BackupDir, "b")
	if err := json.Unmarshal(call("POST", "/v1/admin/backup", `{"dir":"`+dir+`"}`), &res); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join("schedules", "journal")
	want, err := os.ReadFile(filepath.Join(cfg.DataDir, journal))
	if err != nil || len(want) == 0 {
		t.Fatalf("the broker wrote no journal: %v", err)
	}
	// The journal is append-only, and the runner may append after the
	// backup: the copy is a prefix of the broker's, holding the create.
	if got, err := os.ReadFile(filepath.Join(dir, journal)); err != nil || len(got) == 0 || !bytes.HasPrefix(want, got) {
		t.Errorf("journal in the backup: %d bytes, %v; want a prefix of the broker's %d", len(got), err, len(want))
	}
	if _, err := os.Stat(filepath.Join(dir, virtualMarker)); err != nil {
		t.Errorf("virtual-clock marker in the backup: %v", err)
	}
}
