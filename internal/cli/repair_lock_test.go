package cli

import (
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/engine"
)

// TestRepairRefusesADirectoryInUse: repair never touches a data directory
// a broker has open.
func TestRepairRefusesADirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(engine.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := newRunner(t, nil).run("repair", "--data-dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stderr, "stop it first") {
		t.Fatalf("repair of a directory in use: exit %d, stderr %q", r.code, r.stderr)
	}
}
