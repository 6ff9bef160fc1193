// Package buildinfo says which hourglass this is: the version, commit and
// build date stamped at link time, and the Go version that built it.
//
// `make build` and `make release` stamp the three variables with the
// linker's -X flag, from git:
//
//	go build -ldflags "-X github.com/hourglass-mq/hourglass/internal/buildinfo.Version=v1.2.3 ..."
//
// An unstamped binary (`go run`, a plain `go build`) reports the version
// "devel" and takes the commit and its time from the VCS information the
// go command records in the binary, when there is some (go build in a git
// checkout records it; go run and go test do not). Fields nothing could
// fill read "unknown", so every field is always non-empty.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Stamped at link time (see the package doc); empty when not stamped.
var (
	// Version is the release version, e.g. "v1.2.3" or a git describe.
	Version string
	// Commit is the full commit hash the binary was built from.
	Commit string
	// Date is when the binary was built, RFC 3339 in UTC.
	Date string
)

// Unknown fills a field nothing could fill.
const Unknown = "unknown"

// Devel is the version of a binary built without stamping.
const Devel = "devel"

// Info is the identity of the running binary. Every field is non-empty.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"build_date"`
	GoVersion string `json:"go_version"`
}

// Get returns the running binary's identity.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, Commit, Date, bi)
}

// resolve fills the stamped values, falling back to the go command's VCS
// settings in bi (which may be nil) and then to Devel or Unknown.
func resolve(version, commit, date string, bi *debug.BuildInfo) Info {
	info := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		var rev, at string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if info.Commit == "" && rev != "" {
			info.Commit = rev
			if modified {
				// Built from a work tree with uncommitted changes: the
				// commit alone does not say what was built.
				info.Commit += "-dirty"
			}
		}
		if info.Date == "" {
			// The commit's time is the best date an unstamped build has.
			info.Date = at
		}
	}
	if info.Version == "" {
		info.Version = Devel
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	if info.Date == "" {
		info.Date = Unknown
	}
	return info
}

// String is the one-line form: "hourglass v1.2.3 (commit abc, built D, go1.26)".
func (i Info) String() string {
	return "hourglass " + i.Version + " (commit " + i.Commit + ", built " + i.Date + ", " + i.GoVersion + ")"
}

// Stamp sets the link-time variables as the linker would and returns a
// function that restores them. It is for tests of what reports the build
// (the version command, /healthz, the build_info metric); a binary never
// calls it.
func Stamp(version, commit, date string) (restore func()) {
	old := [3]string{Version, Commit, Date}
	Version, Commit, Date = version, commit, date
	return func() { Version, Commit, Date = old[0], old[1], old[2] }
}
