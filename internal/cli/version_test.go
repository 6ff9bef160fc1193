package cli

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	t.Cleanup(buildinfo.Stamp("v1.4.0", "9f1c2d3e", "2026-11-30T12:00:00Z"))
	r := newRunner(t, nil)
	res := r.run("version")
	if res.code != ExitOK || res.stderr != "" {
		t.Fatalf("version: %+v", res)
	}
	want := "hourglass v1.4.0\ncommit:   9f1c2d3e\nbuilt:    2026-11-30T12:00:00Z\ngo:       " + runtime.Version() + "\n"
	if res.stdout != want {
		t.Fatalf("version printed\n%q\nwant\n%q", res.stdout, want)
	}

	res = r.run("version", "--json")
	if res.code != ExitOK {
		t.Fatalf("version --json: %+v", res)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("version --json is not JSON: %v\n%s", err, res.stdout)
	}
	for k, v := range map[string]string{"version": "v1.4.0", "commit": "9f1c2d3e", "build_date": "2026-11-30T12:00:00Z", "go_version": runtime.Version()} {
		if got[k] != v {
			t.Errorf("version --json: %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

// TestVersionUnstamped: a test binary is not stamped, so the version is
// "devel" and no field is empty.
func TestVersionUnstamped(t *testing.T) {
	t.Cleanup(buildinfo.Stamp("", "", ""))
	res := newRunner(t, nil).run("version")
	if res.code != ExitOK || !strings.HasPrefix(res.stdout, "hourglass devel\n") {
		t.Fatalf("unstamped version: %+v", res)
	}
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		if f := strings.Fields(line); len(f) != 2 {
			t.Errorf("line %q has an empty value", line)
		}
	}
}

func TestVersionRefusesArguments(t *testing.T) {
	res := newRunner(t, nil).run("version", "extra")
	if res.code != ExitUsage || !strings.Contains(res.stderr, `unexpected argument "extra"`) {
		t.Fatalf("version extra: %+v", res)
	}
}
