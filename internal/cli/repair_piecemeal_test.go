package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// copyDir copies the regular files under src to dst, recursively.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func sendSome(t *testing.T, dir string, n int) {
	t.Helper()
	o := engine.Options{Dir: dir, SegmentBytes: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	e, err := engine.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := e.Send(context.Background(), message.Message{Topic: "t", Body: []byte("a message body")}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRepairCommandPiecemealCopy is issue 29's defect 8: a data directory
// whose checkpoint was copied at a later moment than its log (a copy made
// file by file while the broker ran). The broker refuses it, and repair
// used to answer "no damage found; nothing changed" with exit 0. Now it
// says what is left, that it does not mend it, and exits 1.
func TestRepairCommandPiecemealCopy(t *testing.T) {
	live, cp := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	sendSome(t, live, 40)
	copyDir(t, live, cp)
	sendSome(t, live, 80)
	b, err := os.ReadFile(filepath.Join(live, "CHECKPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cp, "CHECKPOINT"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if e, err := engine.Open(engine.Options{Dir: cp, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err == nil {
		e.Close()
		t.Fatal("the broker started on the piecemeal copy")
	}
	r := newRunner(t, nil).run("repair", "--data-dir", cp)
	if r.code != ExitFailed || strings.Contains(r.stdout, "no damage found") || !strings.Contains(r.stdout, "problem: CHECKPOINT") ||
		!strings.Contains(r.stdout, "is outside the log") || !strings.Contains(r.stdout, "repair mends damaged commit-log records only") {
		t.Fatalf("repair of a piecemeal copy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
