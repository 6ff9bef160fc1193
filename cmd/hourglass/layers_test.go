package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module's root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found above cmd/hourglass: %v", err)
	}
	return root
}

// importers returns the .go files of dir (relative to root, non-recursive)
// that import pkg.
func importers(t *testing.T, root, dir, pkg string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s: the check would pass vacuously", dir)
	}
	var out []string
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == pkg {
				rel, _ := filepath.Rel(root, f)
				out = append(out, filepath.ToSlash(rel))
			}
		}
	}
	sort.Strings(out)
	return out
}

// commitlogAllowed lists the files of the composition, the HTTP API and
// the CLI that may import the commit log, each with its reason. Spelling
// the flush policy is not a reason: the engine has its own
// (engine.FlushPolicy).
var commitlogAllowed = map[string]string{
	// The repair command's tests build a damaged log record by record
	// (`hourglass repair` itself spells its modes through the engine:
	// engine.RepairMode). Tests elsewhere that need a damaged log use
	// commitlog/commitlogtest, which knows the framing so that they do not.
	"internal/cli/repair_test.go": "builds a damaged log",
}

// TestOnlyStorageToolingImportsCommitlog: the composition root (broker),
// the HTTP API (server) and the CLI reach the commit log through the
// engine; a file among them that imports it is either listed above with
// its reason or fails here.
func TestOnlyStorageToolingImportsCommitlog(t *testing.T) {
	root := repoRoot(t)
	const pkg = "github.com/hourglass-mq/hourglass/commitlog"
	seen := map[string]bool{}
	for _, dir := range []string{"broker", "server", "internal/cli", "hourglasstest", "cmd/hourglass"} {
		for _, f := range importers(t, root, dir, pkg) {
			seen[f] = true
			if _, ok := commitlogAllowed[f]; !ok {
				t.Errorf("%s imports commitlog; use the engine's types (engine.FlushPolicy), or list it in commitlogAllowed with the reason", f)
			}
		}
	}
	for f := range commitlogAllowed {
		if !seen[f] {
			t.Errorf("commitlogAllowed lists %s, which no longer imports commitlog: remove it", f)
		}
	}
	// The check sees an import where there is one.
	if got := importers(t, root, "engine", pkg); len(got) == 0 || !strings.HasPrefix(got[0], "engine/") {
		t.Fatalf("the engine imports commitlog, but the check found %v", got)
	}
}

// devOnly are the developer's benchmark commands: each its own main, run
// from a checkout (Makefile, scripts/), never part of the shipped binary.
// The operator's acceptance test, `hourglass bench` (internal/loadtest),
// and `hourglass bench kafka` (kafkamode/kafkabench) are not among them;
// internal/kafkabench adds the developer's scheme C to the latter.
var devOnly = []string{
	"internal/enginebench", "internal/rmqbench", "internal/schedbench",
	"internal/kafkabench", "internal/netbench",
}

// TestShippedBinaryLinksNoDevTools: `go list -deps ./cmd/hourglass` (the
// packages the shipped binary links) holds none of the developer's
// benchmark commands, and every command under internal/ is listed in
// devOnly, so that a new one is judged here rather than slipping in.
func TestShippedBinaryLinksNoDevTools(t *testing.T) {
	root := repoRoot(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the binary's packages: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "./cmd/hourglass")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/hourglass: %v", err)
	}
	const module = "github.com/hourglass-mq/hourglass/"
	linked := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		linked[strings.TrimPrefix(p, module)] = true
	}
	if !linked["internal/loadtest"] || !linked["broker"] {
		t.Fatalf("the shipped binary does not link hourglass bench or the broker: the listing is wrong:\n%s", out)
	}
	// hourglass bench kafka, the operator's measure of Kafka mode and of
	// the floor of their own Kafka (issue 27), is part of the binary.
	if !linked["kafkamode/kafkabench"] {
		t.Errorf("the shipped binary does not link kafkamode/kafkabench: hourglass bench kafka is gone")
	}
	for _, p := range devOnly {
		if linked[p] {
			t.Errorf("the shipped binary links %s, a developer's benchmark", p)
		}
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("devOnly lists %s, which is gone: %v", p, err)
		}
	}
	listed := map[string]bool{}
	for _, p := range devOnly {
		listed[p] = true
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "internal", "*"))
	for _, d := range dirs {
		rel, _ := filepath.Rel(root, d)
		rel = filepath.ToSlash(rel)
		if isMain(t, d) && !listed[rel] {
			t.Errorf("%s is a command under internal/ that devOnly does not list: add it there (or move it)", rel)
		}
	}
}

// isMain reports whether dir holds a main package.
func isMain(t *testing.T, dir string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		return parsed.Name.Name == "main"
	}
	return false
}
