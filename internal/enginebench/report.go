package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// startVersion is codeVersion() when the program started.
var startVersion = codeVersion()

// startLoad is the 1-minute load average when the program started.
var startLoad = loadAvg()

// loadAvg is the 1-minute load average: on a shared machine, other work
// competes with the benchmark for the CPUs and the disk.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}

// report is the result block of one scenario. It prints as Markdown so the
// block can be pasted into docs/benchmarks.md as is.
type report struct {
	scenario string
	dataDir  string // for the filesystem fact; never printed
	notes    []string
	rows     [][5]string // figure, value, baseline, ratio, target
}

func newReport(scenario, dataDir string) *report {
	return &report{scenario: scenario, dataDir: dataDir}
}

// note adds a line of explanation: sizes, method, deviations from the brief.
func (r *report) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// fig adds a figure without baseline.
func (r *report) fig(name, value string) { r.rows = append(r.rows, [5]string{name, value, "", "", ""}) }

// figT adds a figure with the design target it is checked against.
func (r *report) figT(name, value, target string) {
	r.rows = append(r.rows, [5]string{name, value, "", "", target})
}

// cmp adds a figure with its same-run baseline and the ratio value/baseline.
func (r *report) cmp(name, value, baseline string, ratio float64, target string) {
	r.rows = append(r.rows, [5]string{name, value, baseline, fmt.Sprintf("%.2f", ratio), target})
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n### enginebench %s\n\n", r.scenario)
	fmt.Fprintf(w, "- command: `go run ./internal/enginebench %s`\n", commandArgs())
	fmt.Fprintf(w, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "- machine: %s\n", machineFacts(r.dataDir))
	fmt.Fprintf(w, "- code: %s\n", startVersion)
	fmt.Fprintf(w, "- load average (1 min) at start / end: %s / %s (other work on the machine competes for its %d CPUs and disk)\n", startLoad, loadAvg(), runtime.NumCPU())
	for _, n := range r.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| figure | value | baseline (same run) | ratio | target |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, row := range r.rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", row[0], row[1], row[2], row[3], row[4])
	}
	fmt.Fprintln(w)
}

// commandArgs is the command line with the data directory shown as DIR,
// so that no path of this machine ends up in the docs.
func commandArgs() string {
	args := append([]string(nil), os.Args[1:]...)
	for i, a := range args {
		switch {
		case (a == "-dir" || a == "--dir") && i+1 < len(args):
			args[i+1] = "DIR"
		case strings.HasPrefix(a, "-dir=") || strings.HasPrefix(a, "--dir="):
			args[i] = "-dir=DIR"
		case (a == "-cpuprofile" || a == "-mutexprofile" || a == "-trace") && i+1 < len(args):
			args[i+1] = "FILE"
		case (a == "-binary" || a == "--binary") && i+1 < len(args):
			// A path of the machine that ran it says nothing to a reader.
			args[i+1] = "BIN/hourglass"
		}
	}
	return strings.Join(args, " ")
}

// machineFacts describes the machine: CPUs as nproc counts them, the CPU
// model, memory, kernel, Go version and the data directory's filesystem.
func machineFacts(dir string) string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if _, v, ok := strings.Cut(l, ":"); ok {
					cpu = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	mem := "unknown"
	if kb := procField("/proc/meminfo", "MemTotal"); kb > 0 {
		mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	kernel := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("nproc %d (%s), RAM %s, Linux %s, %s, GOMAXPROCS %d, data dir on %s",
		runtime.NumCPU(), cpu, mem, kernel, runtime.Version(), runtime.GOMAXPROCS(0), fsType(dir))
}

// engineDirs are the packages whose code the figures measure.
var engineDirs = []string{"engine", "commitlog", "timerstore", "timewheel", "queueindex", "message", "vfs"}

// codeVersion names the code under test, read from git when the program
// starts (builds here are not VCS-stamped): HEAD, the last commit that
// touched the engine's packages, and whether they had uncommitted changes.
func codeVersion() string {
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	head := git("rev-parse", "--short=12", "HEAD")
	if head == "" {
		return "unknown (not run inside the git work tree)"
	}
	eng := git(append([]string{"log", "-1", "--format=%h", "--abbrev=12", "--"}, engineDirs...)...)
	v := fmt.Sprintf("HEAD %s; engine packages (%s) last changed in %s", head, strings.Join(engineDirs, ", "), eng)
	if git(append([]string{"status", "--porcelain", "--"}, engineDirs...)...) != "" {
		v += ", WITH uncommitted changes in them"
	}
	return v
}

// fsType names the filesystem holding dir, for the few types we expect.
func fsType(dir string) string {
	if dir == "" {
		return "n/a"
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown filesystem"
	}
	switch st.Type {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs (NOT a disk: fsync is free)"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("filesystem 0x%x", st.Type)
}

// procField returns the value in kB of a "Name:   123 kB" line of a /proc file.
func procField(file, name string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			var n int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			return n
		}
	}
	return -1
}

// rssBytes is the process's resident set size (VmRSS).
func rssBytes() int64 { return procField("/proc/self/status", "VmRSS") * 1024 }

// hwmBytes is the process's peak resident set size (VmHWM).
func hwmBytes() int64 { return procField("/proc/self/status", "VmHWM") * 1024 }

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// rate formats a per-second rate.
func rate(n int, d time.Duration) string {
	return fmt.Sprintf("%s/s", humanInt(int64(float64(n)/d.Seconds())))
}

// humanInt writes n with thousands separators.
func humanInt(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// secs formats a duration in seconds with millisecond precision.
func secs(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }
