package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/vfs"
)

// damagedDataDir makes a data directory whose log holds five records, the
// second of which has a flipped payload bit, and returns the directory and
// the records' positions.
func damagedDataDir(t *testing.T) (string, []commitlog.Pos) {
	t.Helper()
	dir := t.TempDir()
	opts := commitlog.Options{FS: vfs.OS, Dir: filepath.Join(dir, "log")}
	l, err := commitlog.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var ps []commitlog.Pos
	for _, body := range []string{"one", "two", "three", "four", "five"} {
		p, err := l.Append(commitlog.Record{Type: 1, Payload: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p[0])
	}
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(opts.Dir, segs[0].Name)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[commitlog.HeaderSize+int(ps[1])+commitlog.FrameHeaderSize] ^= 0x20
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := commitlog.Open(opts); !errors.Is(err, commitlog.ErrCorrupt) {
		t.Fatalf("Open of the damaged log: %v, want a refusal", err)
	}
	return dir, ps
}

func TestRepairCommandSalvage(t *testing.T) {
	dir, ps := damagedDataDir(t)
	r := newRunner(t, nil).run("repair", "--data-dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("repair: exit %d, %s", r.code, r.stderr)
	}
	var rep commitlog.RepairReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("output is not a report: %v\n%s", err, r.stdout)
	}
	if rep.Mode != "salvage" || len(rep.Ranges) != 1 || rep.Ranges[0].Pos != ps[1] || rep.RecordsKept != 3 || rep.RecordsLost != 0 {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "log", rep.Ranges[0].Quarantine)); err != nil {
		t.Fatalf("quarantine file: %v", err)
	}
	l, err := commitlog.Open(commitlog.Options{FS: vfs.OS, Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatalf("Open after repair: %v", err)
	}
	defer l.Close()
	for i, body := range []string{"one", "", "three", "four", "five"} {
		rec, _, err := l.Read(ps[i])
		if i == 1 {
			if !errors.Is(err, commitlog.ErrCorrupt) {
				t.Fatalf("Read of the damaged record: %v", err)
			}
			continue
		}
		if err != nil || string(rec.Payload) != body {
			t.Fatalf("record %d after repair: %q, %v", i, rec.Payload, err)
		}
	}

	// Run again, as text: nothing left to do.
	r = newRunner(t, nil).run("repair", "--data-dir", dir)
	if r.code != ExitOK || !strings.Contains(r.stdout, "no damage found") {
		t.Fatalf("second repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestRepairCommandTruncateText(t *testing.T) {
	dir, ps := damagedDataDir(t)
	r := newRunner(t, nil).run("repair", "--data-dir", dir, "--mode", "truncate")
	if r.code != ExitOK {
		t.Fatalf("repair: exit %d, %s", r.code, r.stderr)
	}
	for _, want := range []string{"cut from the log", "3 valid records besides the damaged bytes", ".damaged-"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output does not say %q:\n%s", want, r.stdout)
		}
	}
	l, err := commitlog.Open(commitlog.Options{FS: vfs.OS, Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatalf("Open after repair: %v", err)
	}
	defer l.Close()
	if l.Head() != ps[1] {
		t.Fatalf("Head %d after truncate, want %d", l.Head(), ps[1])
	}
}

func TestRepairCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"repair"}, ExitUsage, "--data-dir is required"},
		{[]string{"repair", "--data-dir", "x", "--mode", "cut"}, ExitUsage, "want salvage or truncate"},
		{[]string{"repair", "--data-dir", "x", "extra"}, ExitUsage, "unexpected argument"},
		{[]string{"repair", "--data-dir", filepath.Join(t.TempDir(), "missing")}, ExitFailed, "list dir"},
	} {
		r := newRunner(t, nil).run(tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
