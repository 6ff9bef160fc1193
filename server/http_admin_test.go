package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestBackupRoute: disabled without --backup-dir (409), 400 for a target
// that is relative, outside the backup directory, not empty or without a
// parent, 401 without the token, and 200 with a backup a broker opens.
func TestBackupRoute(t *testing.T) {
	root := t.TempDir()
	backups := filepath.Join(root, "backups")
	os.MkdirAll(filepath.Join(backups, "full"), 0o755)
	os.WriteFile(filepath.Join(backups, "full", "x"), nil, 0o644)
	off := newTestServer(t)
	if r := off.do("POST", "/v1/admin/backup", map[string]any{"dir": filepath.Join(backups, "b")}); r.status != http.StatusConflict || r.errorCode() != "failed_precondition" {
		t.Fatalf("backup without --backup-dir: %d %s", r.status, r.body)
	}
	ts := newTestServer(t, withOptions(func(c *Options) { c.BackupDir = backups; c.AuthToken = "tok" }),
		func(_ *Options, o *engine.Options) { o.FS, o.Dir = vfs.OS, filepath.Join(root, "data") })
	auth := []string{"Authorization", "Bearer tok"}
	if r := ts.do("POST", "/v1/admin/backup", map[string]any{"dir": filepath.Join(backups, "b")}); r.status != http.StatusUnauthorized {
		t.Fatalf("backup without the token: %d %s", r.status, r.body)
	}
	// A link inside the backup directory must not lead a backup outside it.
	os.MkdirAll(filepath.Join(root, "outside"), 0o755)
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(backups, "link")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"b", "relative/b", root + "/elsewhere", filepath.Join(backups, "full"), filepath.Join(backups, "no", "parent"), backups,
		filepath.Join(backups, "link", "b2"), filepath.Join(backups, "link")} {
		if r := ts.do("POST", "/v1/admin/backup", map[string]any{"dir": dir}, auth...); r.status != http.StatusBadRequest || r.errorCode() != "invalid_argument" {
			t.Errorf("backup to %q: %d %s, want 400 invalid_argument", dir, r.status, r.body)
		}
	}
	if r := ts.do("POST", "/v1/admin/backup", map[string]any{}, auth...); r.status != http.StatusBadRequest {
		t.Errorf("backup without dir: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v1/topics/t/messages", map[string]any{"body": "x", "delay": "1h"}, auth...); r.status != http.StatusOK {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	// The scheme name is case-insensitive; the token is not.
	if r := ts.do("GET", "/v1/stats", nil, "Authorization", "bearer tok"); r.status != http.StatusOK {
		t.Errorf("lower-case bearer scheme: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/v1/stats", nil, "Authorization", "Bearer TOK"); r.status != http.StatusUnauthorized {
		t.Errorf("a token in other case: %d %s", r.status, r.body)
	}
	r := ts.do("POST", "/v1/admin/backup", map[string]any{"dir": filepath.Join(backups, "b")}, auth...)
	var res api.BackupResult
	if r.status != http.StatusOK || json.Unmarshal(r.body, &res) != nil || res.Files == 0 || res.LogHead == 0 {
		t.Fatalf("backup: %d %s", r.status, r.body)
	}
	rep, err := engine.Check(vfs.OS, res.Dir, engine.CheckOptions{})
	if err != nil || !rep.OK() || rep.Messages != 1 {
		t.Fatalf("check of the backup: %v %+v", err, rep)
	}
}

// TestBackupCarriesServerState: the files the broker writes beside the
// engine's (Options.StateFiles: here a journal and a marker) are in a
// backup, byte for byte, written before the backup is renamed into place
// (a review found a crash could leave a backup without them).
func TestBackupCarriesServerState(t *testing.T) {
	const virtualMarker = "VIRTUAL_CLOCK"
	files := []string{filepath.Join("schedules", "journal"), virtualMarker}
	data, root := t.TempDir(), t.TempDir()
	eng, err := engine.Open(engine.Options{Dir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	journal := []byte("journal bytes")
	os.MkdirAll(filepath.Join(data, "schedules"), 0o755)
	os.WriteFile(filepath.Join(data, "schedules", "journal"), journal, 0o644)
	os.WriteFile(filepath.Join(data, virtualMarker), []byte("v"), 0o644)
	state, err := readStateFiles(data, files)
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(root, "b")
	if _, err := eng.BackupWith(context.Background(), backup, state); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(backup, "schedules", "journal")); err != nil || string(b) != string(journal) {
		t.Errorf("journal in the backup: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(backup, virtualMarker)); err != nil {
		t.Errorf("virtual-clock marker in the backup: %v", err)
	}
	// A data directory without them: nothing to carry, no error.
	if st, err := readStateFiles(t.TempDir(), files); err != nil || len(st) != 0 {
		t.Errorf("without schedules or marker: %v %v", st, err)
	}
}
