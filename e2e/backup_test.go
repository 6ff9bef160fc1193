package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestBackupUnderLoadRestoreCheckDeliver: `hourglass backup` of a broker
// under a send load, then `hourglass restore`, `hourglass check`, and a
// broker on the restore that delivers every message acknowledged before
// the backup began, each once, none before its due time; a message
// acknowledged during the backup is delivered whole or not at all.
func TestBackupUnderLoadRestoreCheckDeliver(t *testing.T) {
	root := t.TempDir()
	backups := filepath.Join(root, "backups")
	s := startServer(t, filepath.Join(root, "data"), []string{"HOURGLASS_AUTH_TOKEN=tok"}, "--backup-dir", backups, "--segment-bytes", "1MiB")
	s.call("PUT", "/v1/topics/load", map[string]any{"queues": 4}, http.StatusCreated, nil)
	if _, stderr, code := runBinary(t, "backup", "--server", s.base, "--token", "tok", "--out", filepath.Join(root, "outside")); code != 1 || !strings.Contains(stderr, "backup-dir") {
		t.Fatalf("backup outside --backup-dir: exit %d %s", code, stderr)
	}
	mkdirAll(t, backups)

	type sent struct {
		id, body string
		due      int64
	}
	var mu sync.Mutex
	var phase int // 0 before the backup, 1 while it runs, 2 after it returned
	acked := map[int][]sent{}
	var total atomic.Int64
	pad := strings.Repeat("x", 1000) // a few log segments of 1 MiB: sealed ones are linked
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("w%d-%d-%s", w, i, pad)
				mu.Lock()
				p := phase
				mu.Unlock()
				r, err := s.try("POST", "/v1/topics/load/messages", map[string]any{"body": body, "delay": fmt.Sprintf("%dms", 500+i%1500)})
				if err != nil || r.status != http.StatusOK {
					t.Errorf("send: %v %d %s", err, r.status, r.body)
					return
				}
				var rc receipt
				if err := jsonUnmarshal(r.body, &rc); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				// Acknowledged before the backup began (the phase, read
				// after the answer, still 0): must be in it. Sent after the
				// backup returned (the phase, read before the send,
				// already 2): must not. Anything else may be, whole.
				k := 1
				switch {
				case phase == 0:
					k = 0
				case p == 2:
					k = 2
				}
				acked[k] = append(acked[k], sent{rc.ID, body, rc.Due})
				mu.Unlock()
				total.Add(1)
			}
		}()
	}
	eventually(t, 30*time.Second, "1000 acknowledged sends", func() bool { return total.Load() >= 1000 })
	mu.Lock()
	phase = 1
	mu.Unlock()
	out := filepath.Join(backups, "b1")
	stdout, stderr, code := runBinary(t, "backup", "--server", s.base, "--token", "tok", "--out", out)
	mu.Lock()
	phase = 2
	mu.Unlock()
	if code != 0 || strings.Contains(stdout, "linked:       0 segments") {
		t.Fatalf("backup: exit %d (want 0, with sealed segments linked)\n%s%s", code, stdout, stderr)
	}
	at := total.Load()
	eventually(t, 30*time.Second, "sends after the backup", func() bool { return total.Load() >= at+100 })
	close(stop)
	wg.Wait()
	t.Logf("backup under load: %d acknowledged before, %d during, %d sent after\n%s", len(acked[0]), len(acked[1]), len(acked[2]), stdout)

	// A target that is not empty is refused, with exit status 2.
	if _, stderr, code := runBinary(t, "restore", "--from", out, "--data-dir", backups); code != 2 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("restore into a non-empty directory: exit %d, stderr %q", code, stderr)
	}
	restored := filepath.Join(root, "restored")
	if stdout, stderr, code := runBinary(t, "restore", "--from", out, "--data-dir", restored); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, stdout, stderr)
	}
	if stdout, stderr, code := runBinary(t, "check", "--data-dir", restored); code != 0 || !strings.Contains(stdout, ": clean") {
		t.Fatalf("check of the restore: exit %d\n%s%s", code, stdout, stderr)
	}
	// The original goes on; the restore is served by a broker of its own.
	if err := s.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := startServer(t, restored, nil)
	r.call("PUT", "/v1/topics/load/groups/g", nil, http.StatusCreated, nil)
	got := map[string]received{}
	want := map[string]sent{}
	for _, m := range acked[0] {
		want[m.id] = m
	}
	during := map[string]sent{}
	for _, m := range acked[1] {
		during[m.id] = m
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ms := r.receive("load", "g", map[string]any{"max": 500, "wait": "500ms"})
		for _, m := range ms {
			if _, dup := got[m.ID]; dup {
				t.Fatalf("%s delivered twice", m.ID)
			}
			got[m.ID] = m
			exp, before := want[m.ID]
			if !before {
				if exp, before = during[m.ID]; !before {
					t.Fatalf("delivered %s, which was sent after the backup returned (or never)", m.ID)
				}
			}
			if m.Body == nil || *m.Body != exp.body || m.Due != exp.due || m.Visible < m.Due {
				t.Fatalf("delivered %+v, sent %+v: not whole, or early", m, exp)
			}
		}
		r.ack("load", "g", ms...)
		missing := 0
		for id := range want {
			if _, ok := got[id]; !ok {
				missing++
			}
		}
		if missing == 0 && len(ms) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages acknowledged before the backup were not delivered from the restore", missing)
		}
	}
	t.Logf("restore delivered all %d sent before the backup and %d of %d sent during it", len(want), len(got)-len(want), len(during))
}

func mkdirAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
