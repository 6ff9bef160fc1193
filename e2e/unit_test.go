package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requireSystemdEnv, set to 1 (by .ci/run), makes a missing
// systemd-analyze a failure; without it the test says loudly that it skips,
// so that `make test` works on a machine without systemd (on Debian it is in
// the systemd package).
const requireSystemdEnv = "HOURGLASS_REQUIRE_SYSTEMD"

// TestSystemdUnitVerifies runs `systemd-analyze verify` on
// deploy/hourglass.service, with ExecStart pointed at the binary under
// test (verify checks that the command exists), and requires no warning:
// unknown or misspelt settings, bad values, a missing binary.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv(requireSystemdEnv) == "1" {
			t.Fatalf("%s=1 but systemd-analyze is not installed (apt-get install systemd): %v", requireSystemdEnv, err)
		}
		t.Skipf("SKIPPED: systemd-analyze is not installed (apt-get install systemd); .ci/run installs it and sets %s=1", requireSystemdEnv)
	}
	unit, err := os.ReadFile("../deploy/hourglass.service")
	if err != nil {
		t.Fatal(err)
	}
	const exec0 = "ExecStart=/usr/local/bin/hourglass "
	if !strings.Contains(string(unit), exec0) {
		t.Fatalf("the unit has no %q line", exec0)
	}
	for _, want := range []string{"Type=notify", "DynamicUser=yes", "StateDirectory=hourglass", "NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths="} {
		if !strings.Contains(string(unit), "\n"+want) {
			t.Errorf("the unit lacks %s", want)
		}
	}
	dir := t.TempDir()
	name := filepath.Join(dir, "hourglass.service")
	if err := os.WriteFile(name, []byte(strings.Replace(string(unit), exec0, "ExecStart="+binary+" ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", name).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
