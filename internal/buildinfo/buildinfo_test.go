package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestResolveStamped(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "fromvcs"}, {Key: "vcs.time", Value: "2000-01-01T00:00:00Z"},
	}}
	got := resolve("v1.2.3", "abc123", "2026-11-30T12:00:00Z", bi)
	want := Info{Version: "v1.2.3", Commit: "abc123", Date: "2026-11-30T12:00:00Z", GoVersion: "go1.99"}
	if got != want {
		t.Fatalf("stamped values must win over VCS info: got %+v, want %+v", got, want)
	}
}

func TestResolveFromVCS(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-29T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	got := resolve("", "", "", bi)
	want := Info{Version: Devel, Commit: "0123abcd-dirty", Date: "2026-11-29T10:00:00Z", GoVersion: "go1.99"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestResolveNothing(t *testing.T) {
	got := resolve("", "", "", nil)
	want := Info{Version: Devel, Commit: Unknown, Date: Unknown, GoVersion: runtime.Version()}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if s := got.String(); s != "hourglass devel (commit unknown, built unknown, "+runtime.Version()+")" {
		t.Fatalf("String: %q", s)
	}
}

// TestGetNeverEmpty: whatever the test binary carries, every field is filled.
func TestGetNeverEmpty(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Commit == "" || i.Date == "" || i.GoVersion == "" {
		t.Fatalf("empty field in %+v", i)
	}
}

func TestStampRestores(t *testing.T) {
	before := Get()
	restore := Stamp("v9", "c9", "d9")
	if i := Get(); i.Version != "v9" || i.Commit != "c9" || i.Date != "d9" {
		t.Fatalf("stamped: %+v", i)
	}
	restore()
	if i := Get(); i != before {
		t.Fatalf("after restore %+v, before %+v", i, before)
	}
}
