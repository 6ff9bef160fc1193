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

	l := startBackupLoad(t, s)
	eventually(t, 30*time.Second, "1000 acknowledged sends", func() bool { return l.total.Load() >= 1000 })
	l.mu.Lock()
	l.phase = 1
	l.mu.Unlock()
	out := filepath.Join(backups, "b1")
	stdout, stderr, code := runBinary(t, "backup", "--server", s.base, "--token", "tok", "--out", out)
	l.mu.Lock()
	l.phase = 2
	l.mu.Unlock()
	if code != 0 || strings.Contains(stdout, "linked:       0 segments") {
		t.Fatalf("backup: exit %d (want 0, with sealed segments linked)\n%s%s", code, stdout, stderr)
	}
	at := l.total.Load()
	eventually(t, 30*time.Second, "sends after the backup", func() bool { return l.total.Load() >= at+100 })
	close(l.stop)
	l.wg.Wait()
	t.Logf("backup under load: %d acknowledged before, %d during, %d sent after\n%s", len(l.acked[0]), len(l.acked[1]), len(l.acked[2]), stdout)

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
	got, want, during := deliverRestored(t, r, l.acked)
	t.Logf("restore delivered all %d sent before the backup and %d of %d sent during it", len(want), len(got)-len(want), len(during))
}

// backupSent is one acknowledged send of the load.
type backupSent struct {
	id, body string
	due      int64
}

// backupLoad is 8 senders to topic "load", each send filed by phase: 0
// before the backup, 1 while it runs, 2 after it returned.
type backupLoad struct {
	mu    sync.Mutex
	phase int // 0 before the backup, 1 while it runs, 2 after it returned
	acked map[int][]backupSent
	total atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
}

// startBackupLoad starts the senders; they run until stop is closed.
func startBackupLoad(t *testing.T, s *server) *backupLoad {
	l := &backupLoad{acked: map[int][]backupSent{}, stop: make(chan struct{})}
	pad := strings.Repeat("x", 1000) // a few log segments of 1 MiB: sealed ones are linked
	for w := 0; w < 8; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				body := fmt.Sprintf("w%d-%d-%s", w, i, pad)
				l.mu.Lock()
				p := l.phase
				l.mu.Unlock()
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
				l.mu.Lock()
				// Acknowledged before the backup began (the phase, read
				// after the answer, still 0): must be in it. Sent after the
				// backup returned (the phase, read before the send,
				// already 2): must not. Anything else may be, whole.
				k := 1
				switch {
				case l.phase == 0:
					k = 0
				case p == 2:
					k = 2
				}
				l.acked[k] = append(l.acked[k], backupSent{rc.ID, body, rc.Due})
				l.mu.Unlock()
				l.total.Add(1)
			}
		}()
	}
	return l
}

// deliverRestored receives and acks from the restored broker r until
// every message acknowledged before the backup (acked[0]) was delivered,
// checking that each is delivered once, whole and not early, and that
// nothing sent after the backup returned is. It returns what was delivered,
// what must be and what may be (sent during the backup).
func deliverRestored(t *testing.T, r *server, acked map[int][]backupSent) (got map[string]received, want, during map[string]backupSent) {
	t.Helper()
	got = map[string]received{}
	want = map[string]backupSent{}
	for _, m := range acked[0] {
		want[m.id] = m
	}
	during = map[string]backupSent{}
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
	return got, want, during
}

func mkdirAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
