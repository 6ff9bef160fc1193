package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
)

// TestClockModeOfDataDir: a directory belongs to the clock it was made
// with; neither broker opens the other's.
func TestClockModeOfDataDir(t *testing.T) {
	virt := filepath.Join(t.TempDir(), "new")
	if err := checkClockMode(virt, api.ClockVirtual); err != nil {
		t.Fatalf("virtual on a missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(virt, virtualMarker)); err != nil {
		t.Fatalf("no marker written: %v", err)
	}
	if err := checkClockMode(virt, api.ClockVirtual); err != nil {
		t.Fatalf("virtual on its own directory: %v", err)
	}
	if err := checkClockMode(virt, api.ClockSystem); err == nil || !strings.Contains(err.Error(), "virtual clock") {
		t.Fatalf("system clock on a virtual directory: %v, want a refusal", err)
	}
	real := t.TempDir()
	if err := os.WriteFile(filepath.Join(real, "IDENTITY"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkClockMode(real, api.ClockSystem); err != nil {
		t.Fatalf("system on a system directory: %v", err)
	}
	if err := checkClockMode(real, api.ClockVirtual); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("virtual on a system directory: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(real, virtualMarker)); err == nil {
		t.Fatal("a refused directory was marked")
	}
}
