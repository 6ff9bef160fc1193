package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// benchColumns are the columns of the table benchmarks.md opens with, by the
// start of their header cells, in order.
var benchColumns = []string{
	"id", "what is measured", "figure", "same-run baseline", "ratio",
	"command", "commit", "date", "load average",
}

const (
	// benchTableWithin is how many lines may stand before the table: the
	// title and a short paragraph on how to read it.
	benchTableWithin = 15
	// benchMaxLines bounds the whole document: a table of current figures
	// with short notes, not a diary (the history is in git).
	benchMaxLines = 600
)

var (
	benchID     = regexp.MustCompile(`^\[([a-z0-9-]+)\]\(#([a-z0-9-]+)\)$`)
	benchCommit = regexp.MustCompile("^`([0-9a-f]{7,40})`")
	benchDate   = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})\b`)
)

// TestBenchmarksOpenWithOneTable holds docs/benchmarks.md to what it
// promises: it opens with one table of current figures, and each row names
// its command, the commit it measured (one in this repository's history),
// the date, the load, its baseline and its ratio, and has a note below.
func TestBenchmarksOpenWithOneTable(t *testing.T) {
	text := readDoc(t, "benchmarks.md")
	lines := strings.Split(text, "\n")
	if n := len(lines); n > benchMaxLines {
		t.Errorf("benchmarks.md has %d lines, more than %d: it is one table of current figures with short notes; the history stays in git", n, benchMaxLines)
	}
	if !strings.HasPrefix(lines[0], "# ") {
		t.Fatalf("benchmarks.md line 1 is %q, want the title", lines[0])
	}
	all := tables(text)
	if len(all) != 1 {
		var at []string
		for _, tb := range all {
			at = append(at, fmt.Sprint(tb.line))
		}
		t.Fatalf("benchmarks.md has %d tables (at lines %s), want exactly one: add figures as rows of the first", len(all), strings.Join(at, ", "))
	}
	tb := all[0]
	if tb.line > benchTableWithin {
		t.Errorf("the table starts at line %d, want it within the first %d lines", tb.line, benchTableWithin)
	}
	for i := 1; i < tb.line; i++ {
		if strings.HasPrefix(lines[i], "#") {
			t.Errorf("line %d, a heading before the table: %q", i+1, lines[i])
		}
	}
	if len(tb.header) != len(benchColumns) {
		t.Fatalf("the table has columns %q, want %d starting with %q", tb.header, len(benchColumns), benchColumns)
	}
	for i, want := range benchColumns {
		if !strings.HasPrefix(strings.ToLower(tb.header[i]), want) {
			t.Errorf("column %d is %q, want one starting with %q", i+1, tb.header[i], want)
		}
	}
	if len(tb.rows) == 0 {
		t.Fatal("the table has no rows")
	}
	git := newGitCheck(t)
	seen := map[string]int{}
	for r, row := range tb.rows {
		line := tb.rowLines[r]
		if len(row) != len(benchColumns) {
			t.Errorf("line %d: %d cells, want %d (a | inside a cell is written \\|)", line, len(row), len(benchColumns))
			continue
		}
		m := benchID.FindStringSubmatch(row[0])
		if m == nil || m[1] != m[2] {
			t.Errorf("line %d: id %q, want [name](#name) with lower-case letters, digits and dashes", line, row[0])
			continue
		}
		id := m[1]
		if prev, ok := seen[id]; ok {
			t.Errorf("line %d: id %q already used on line %d", line, id, prev)
		}
		seen[id] = line
		if !strings.Contains(text, "\n### "+id+"\n") {
			t.Errorf("row %s (line %d): no note below the table headed \"### %s\" for its link to land on", id, line, id)
		}
		for c, name := range []string{"what is measured", "figure", "baseline", "ratio", "load average"} {
			col := []int{1, 2, 3, 4, 8}[c]
			if strings.TrimSpace(row[col]) == "" {
				t.Errorf("row %s (line %d): %s is empty", id, line, name)
			}
		}
		cmds := codeSpans(row[5])
		if len(cmds) == 0 {
			t.Errorf("row %s (line %d): the command %q has no `command` in it", id, line, row[5])
		}
		for _, c := range cmds {
			if err := commandRunsHere(c); err != nil {
				t.Errorf("row %s (line %d): command `%s`: %v", id, line, c, err)
			}
		}
		cm := benchCommit.FindStringSubmatch(row[6])
		if cm == nil {
			t.Errorf("row %s (line %d): commit %q, want a hash in backquotes", id, line, row[6])
		} else if err := git.inHistory(cm[1]); err != nil {
			t.Errorf("row %s (line %d): commit %s: %v", id, line, cm[1], err)
		}
		dm := benchDate.FindStringSubmatch(row[7])
		if dm == nil {
			t.Errorf("row %s (line %d): date %q, want it to start YYYY-MM-DD", id, line, row[7])
		} else if d, err := time.Parse("2006-01-02", dm[1]); err != nil {
			t.Errorf("row %s (line %d): date %q: %v", id, line, dm[1], err)
		} else if d.After(time.Now().Add(24 * time.Hour)) {
			t.Errorf("row %s (line %d): date %s is in the future", id, line, dm[1])
		}
	}
}

// gitCheck answers whether a commit is in the history of HEAD. Without git
// or outside a full checkout (a source archive, a shallow clone) it can
// only check that the hash is well formed, and says so in the test's log.
type gitCheck struct {
	t      *testing.T
	usable bool
}

func newGitCheck(t *testing.T) *gitCheck {
	g := &gitCheck{t: t}
	if _, err := exec.LookPath("git"); err != nil {
		t.Logf("git not found (%v): commits are checked for their form only", err)
		return g
	}
	out, err := exec.Command("git", "rev-parse", "--is-shallow-repository").Output()
	switch {
	case err != nil:
		t.Logf("not in a git checkout (%v): commits are checked for their form only", err)
	case strings.TrimSpace(string(out)) == "true":
		t.Logf("a shallow clone: commits are checked for their form only")
	default:
		g.usable = true
	}
	return g
}

// inHistory reports an error unless hash names a commit that HEAD descends
// from (a hash of a commit that never landed, or a typo, fails).
func (g *gitCheck) inHistory(hash string) error {
	if !g.usable {
		return nil // the form was checked by the caller's pattern
	}
	if out, err := exec.Command("git", "rev-parse", "--verify", "--quiet", hash+"^{commit}").Output(); err != nil {
		return fmt.Errorf("no such commit in this repository")
	} else if full := strings.TrimSpace(string(out)); full != "" {
		if err := exec.Command("git", "merge-base", "--is-ancestor", full, "HEAD").Run(); err != nil {
			return fmt.Errorf("%s is not in the history of HEAD", full)
		}
	}
	return nil
}

var benchLink = regexp.MustCompile(`benchmarks\.md#([A-Za-z0-9_-]+)`)

// TestLinksIntoBenchmarksLand checks that every link into benchmarks.md
// from the repository's other documents names a note that exists, so that
// the table's rewriting leaves no link pointing at a section that is gone.
func TestLinksIntoBenchmarksLand(t *testing.T) {
	text := readDoc(t, "benchmarks.md")
	for _, name := range []string{"../README.md", "architecture.md", "operations.md", "../CONTRIBUTING.md"} {
		doc, err := readOptional(name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		for _, m := range benchLink.FindAllStringSubmatch(doc, -1) {
			if !strings.Contains(text, "\n### "+m[1]+"\n") {
				t.Errorf("%s links to benchmarks.md#%s, which is no note's heading", name, m[1])
			}
		}
	}
}

// commandRunsHere checks what a row's command names in this repository:
// every package or directory it gives as ./path exists (a binary the
// command builds itself, ./x.test, excepted), and every make target it
// runs is in the Makefile. A package moved or a target renamed leaves the
// row's command pointing nowhere; this says which.
func commandRunsHere(cmd string) error {
	fields := strings.Fields(cmd)
	for i, f := range fields {
		if strings.HasPrefix(f, "./") && !strings.HasSuffix(f, ".test") {
			p := strings.TrimSuffix(strings.TrimSuffix(f, "/..."), "/")
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err != nil {
				return fmt.Errorf("%s does not exist", f)
			}
		}
		if f == "make" && i+1 < len(fields) {
			target := fields[i+1]
			mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
			if err != nil {
				return err
			}
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(mk) {
				return fmt.Errorf("the Makefile has no target %s", target)
			}
		}
	}
	return nil
}
