package e2e_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// runBinary runs the hourglass binary and returns its stdout, stderr and
// exit code.
func runBinary(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// fillAndStop runs a broker on a new directory, gives it every kind of
// file (near and far messages, keys, a cancel and a reschedule, fired
// messages), stops it with SIGTERM and returns the directory.
func fillAndStop(t *testing.T) string {
	t.Helper()
	s := startServer(t, "", nil)
	s.call("PUT", "/v1/topics/c", nil, http.StatusCreated, nil)
	var far []receipt
	for i := 0; i < 40; i++ {
		var rc receipt
		s.call("POST", "/v1/topics/c/messages", map[string]any{"body": fmt.Sprint("near-", i), "key": fmt.Sprint("n", i)}, http.StatusOK, nil)
		s.call("POST", "/v1/topics/c/messages", map[string]any{"body": fmt.Sprint("far-", i), "key": fmt.Sprint("f", i), "delay": "2h"}, http.StatusOK, &rc)
		far = append(far, rc)
	}
	s.call("DELETE", "/v1/messages/"+far[0].ID, nil, http.StatusOK, nil)
	s.call("POST", "/v1/messages/"+far[1].ID+"/reschedule", map[string]any{"delay": "3h"}, http.StatusOK, nil)
	// The live directory is refused, with exit status 2.
	if _, stderr, code := runBinary(t, "check", "--data-dir", s.dataDir); code != 2 || !strings.Contains(stderr, "in use") {
		t.Fatalf("check of a live broker's directory: exit %d, stderr %q", code, stderr)
	}
	if err := s.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, s.logs)
	}
	return s.dataDir
}

// lastFile returns the last file of dir/sub with the suffix.
func lastFile(t *testing.T, dir, sub, suffix string) string {
	t.Helper()
	var names []string
	filepath.Walk(filepath.Join(dir, sub), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, suffix) {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatalf("no %s file in %s", suffix, sub)
	}
	return names[len(names)-1]
}

func writeAt(t *testing.T, name string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, name string) int64 {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCheckCommand: `hourglass check` passes a clean directory, and finds
// each damage the torn-tail and corruption tests make, naming the file;
// a torn tail is a note (recovery cuts it), not a problem.
func TestCheckCommand(t *testing.T) {
	clean := fillAndStop(t)
	out, stderr, code := runBinary(t, "check", "--data-dir", clean)
	if code != 0 || !strings.Contains(out, ": clean, 0 note(s)") {
		t.Fatalf("clean directory: exit %d\n%s%s", code, out, stderr)
	}
	out, _, code = runBinary(t, "check", "--data-dir", clean, "--json")
	var rep struct {
		Problems       []struct{ File string }
		Messages       int
		QueueEntries   int64 `json:"queue_entries"`
		TimerEntries   int64 `json:"timer_entries"`
		KeyEntries     int64 `json:"key_entries"`
		OverlayEntries int64 `json:"overlay_entries"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	if rep.Messages != 80 || rep.QueueEntries != 40 || rep.TimerEntries == 0 || rep.KeyEntries != 80 || rep.OverlayEntries == 0 {
		t.Fatalf("not everything was checked: %+v", rep)
	}
	segment := func(dir string) string { return lastFile(t, dir, "log", ".log") }
	cases := []struct {
		name   string
		damage func(dir string)
		code   int
		want   string // a line of the output starts with it
	}{
		{"torn tail", func(dir string) {
			seg := segment(dir)
			writeAt(t, seg, fileSize(t, seg), []byte{0x40, 0, 0, 0, 9, 9, 9, 9, 1, 'p', 'a'})
		}, 0, "note: log/"},
		{"flipped byte in a record", func(dir string) {
			writeAt(t, segment(dir), 20+100, []byte{0xa5})
		}, 1, "problem: log/"},
		{"zeroed block", func(dir string) {
			writeAt(t, segment(dir), 1024, make([]byte, 512))
		}, 1, "problem: log/"},
		{"truncated queue index", func(dir string) {
			qi := lastFile(t, dir, "queues", ".qi")
			os.Truncate(qi, fileSize(t, qi)/2-1)
		}, 1, "problem: queues/"},
		{"truncated timer run", func(dir string) {
			tr := lastFile(t, dir, "timers", ".tr")
			os.Truncate(tr, fileSize(t, tr)-24)
		}, 1, "problem: timers/"},
		{"corrupt key index", func(dir string) {
			writeAt(t, lastFile(t, dir, "keys", ".kix"), 40, []byte{1, 2, 3})
		}, 1, "problem: keys/"},
		{"corrupt checkpoint", func(dir string) {
			writeAt(t, filepath.Join(dir, "CHECKPOINT"), 12, []byte{0xff, 0xff})
		}, 1, "problem: CHECKPOINT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.CopyFS(dir, os.DirFS(clean)); err != nil {
				t.Fatal(err)
			}
			tc.damage(dir)
			out, stderr, code := runBinary(t, "check", "--data-dir", dir)
			if code != tc.code || !strings.Contains("\n"+out, "\n"+tc.want) {
				t.Fatalf("exit %d (want %d), want a line %q:\n%s%s", code, tc.code, tc.want, out, stderr)
			}
			if lines := strings.Split(strings.TrimSpace(out), "\n"); !strings.Contains(lines[len(lines)-1], dir+": ") {
				t.Fatalf("no summary line last:\n%s", out)
			}
		})
	}
}
