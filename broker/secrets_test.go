package broker

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/access/accesstest"
)

// TestSecretsNeverShow: a principal's secret and the -auth-token appear
// in none of: the credentials file, the broker's log, the audit trail,
// /metrics, a backup (names and bytes of every file) and the answers,
// refusals and errors included, of requests made with right, wrong and
// mangled credentials.
func TestSecretsNeverShow(t *testing.T) {
	dir := t.TempDir()
	creds, secrets := accesstest.Write(t, dir, map[string][]string{
		"ops": {"admin:*", "metrics:*", "manage:*"}, "producer": {"send:orders"},
	})
	const token = "the-auth-token-0123456789"
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.GRPCListen, cfg.RemotingListen = t.TempDir(), "127.0.0.1:0", "", ""
	cfg.Credentials, cfg.AuthToken = creds, token
	cfg.AuditLog = filepath.Join(dir, "audit.log")
	cfg.BackupDir = filepath.Join(dir, "backups")
	if err := os.Mkdir(cfg.BackupDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	base, runErr := startRun(ctx, t, cfg, slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	var answers bytes.Buffer
	do := func(method, path, body string, auth string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(&answers, resp.Body)
		for k, v := range resp.Header {
			answers.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}
	ops, producer := "Bearer ops:"+secrets["ops"], "Bearer producer:"+secrets["producer"]
	do("POST", "/v1/topics/orders/messages", `{"body":"b","delay":"1h"}`, producer)
	do("POST", "/v1/topics/invoices/messages", `{"body":"b"}`, producer)                    // 403
	do("GET", "/v1/topics", "", "Bearer producer:"+secrets["ops"])                          // wrong secret
	do("GET", "/v1/topics", "", "Bearer ops:"+secrets["ops"][:20])                          // a cut secret
	do("GET", "/v1/topics", "", "Basic "+secrets["producer"])                               // a mangled Basic
	do("GET", "/v1/topics", "", "Bearer "+token+"x")                                        // a wrong token
	do("POST", "/v1/admin/backup", `{"dir":"`+filepath.Join(cfg.BackupDir, "b1")+`"}`, ops) // a backup
	do("POST", "/v1/admin/backup", `{"dir":"/elsewhere"}`, ops)                             // an error
	do("GET", "/metrics", "", ops)
	do("GET", "/v1/stats", "", "Bearer "+token)
	cancel()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}

	places := map[string][]byte{"answers": answers.Bytes(), "log": logs.Bytes()}
	for name, p := range map[string]string{"credentials file": creds, "audit trail": cfg.AuditLog} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		places[name] = data
	}
	var backup bytes.Buffer
	n := 0
	filepath.WalkDir(cfg.BackupDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		backup.WriteString(p + "\n")
		if !d.IsDir() {
			n++
			data, _ := os.ReadFile(p)
			backup.Write(data)
		}
		return nil
	})
	places["backup"] = backup.Bytes()
	if n == 0 || !strings.Contains(answers.String(), "# HELP") || !strings.Contains(string(places["audit trail"]), `"principal":"ops"`) {
		t.Fatalf("the test did not reach what it checks: %d backup files; answers %.300s", n, answers.String())
	}
	for where, data := range places {
		for who, s := range map[string]string{"ops": secrets["ops"], "producer": secrets["producer"], "auth token": token, "a cut secret": secrets["ops"][:20]} {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("the secret of %s is in the %s", who, where)
			}
		}
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu logSink
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.mu.Lock()
	defer l.mu.mu.Unlock()
	return l.w.Write(p)
}
