package e2e_test

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// TestVersionMatchesHealthzAndMetrics: the binary's version (stamped by
// the linker, as make build does) is what a broker it runs reports on
// /healthz and in hourglass_build_info. (An unstamped build's fallback,
// "devel", is internal/buildinfo's TestResolveNothing.)
func TestVersionMatchesHealthzAndMetrics(t *testing.T) {
	out, err := exec.Command(binary, "version", "--json").Output()
	if err != nil {
		t.Fatalf("version --json: %v", err)
	}
	var v map[string]string
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, out)
	}
	if v["version"] != stampVersion || v["commit"] != stampCommit || v["build_date"] != stampDate || !strings.HasPrefix(v["go_version"], "go") {
		t.Fatalf("stamped version: %v", v)
	}

	s := startServer(t, "", nil)
	var h map[string]string
	s.call("GET", "/healthz", nil, http.StatusOK, &h)
	for _, k := range []string{"version", "commit", "build_date", "go_version"} {
		if h[k] != v[k] {
			t.Errorf("/healthz %s = %q, version says %q", k, h[k], v[k])
		}
	}
	metrics := string(s.do("GET", "/metrics", nil).body)
	series := `hourglass_build_info{commit="` + v["commit"] + `",go_version="` + v["go_version"] + `",version="` + stampVersion + `"} 1`
	if !strings.Contains(metrics, series+"\n") {
		t.Errorf("/metrics has no %s", series)
	}
}

// TestVersionStamped: the binary TestMain built as make build does, with
// the linker stamping version, commit and date, prints them.
func TestVersionStamped(t *testing.T) {
	bin := binary
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"hourglass v9.8.7", "commit: 0123456789abcdef", "built: 2026-11-30T10:00:00Z", "go: go"}
	if len(lines) != len(want) {
		t.Fatalf("version printed %q", out)
	}
	for i, l := range lines {
		if got := strings.Join(strings.Fields(l), " "); !strings.HasPrefix(got, want[i]) {
			t.Errorf("line %d: %q, want %q", i+1, got, want[i])
		}
	}
}
