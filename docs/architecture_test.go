package docs

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory, seen from this package's.
const repoRoot = ".."

// sectionTable returns the first table after the heading "## title" of
// text, failing the test when there is none.
func sectionTable(t *testing.T, text, title string) mdTable {
	t.Helper()
	head := "\n## " + title + "\n"
	i := strings.Index(text, head)
	if i < 0 {
		t.Fatalf("architecture.md has no heading %q", "## "+title)
	}
	end := strings.Index(text[i+len(head):], "\n## ")
	body := text[i+len(head):]
	if end >= 0 {
		body = body[:end]
	}
	all := tables(body)
	if len(all) == 0 {
		t.Fatalf("architecture.md, %q: no table", title)
	}
	return all[0]
}

// recordConstants reads the commit-log record types the code defines: the
// constants of type commitlog.Type in engine/records.go, and TypeSkip in
// commitlog/format.go. It returns the spelling the table uses for each
// ("recFire", "commitlog.TypeSkip") with its number.
func recordConstants(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	read := func(file, wantType, prefix string) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(repoRoot, file), nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type == nil || typeName(vs.Type) != wantType {
					continue
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						t.Fatalf("%s: constant %s has no value of its own", file, name.Name)
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: constant %s is not a literal number", file, name.Name)
					}
					n, err := strconv.ParseInt(lit.Value, 0, 64)
					if err != nil {
						t.Fatalf("%s: constant %s = %s: %v", file, name.Name, lit.Value, err)
					}
					out[prefix+name.Name] = int(n)
				}
			}
		}
	}
	read("engine/records.go", "commitlog.Type", "")
	read("commitlog/format.go", "Type", "commitlog.")
	if len(out) == 0 {
		t.Fatal("found no record type constants in engine/records.go and commitlog/format.go")
	}
	return out
}

func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name + "." + x.Sel.Name
		}
	}
	return ""
}

// TestRecordTypesMatchCode holds architecture.md's table of record types to
// the constants that define them: every constant has a row with its number,
// and every row names a constant that has that number.
func TestRecordTypesMatchCode(t *testing.T) {
	code := recordConstants(t)
	tb := sectionTable(t, readDoc(t, "architecture.md"), "Record types")
	if len(tb.header) < 3 || !strings.EqualFold(tb.header[0], "type") || !strings.EqualFold(tb.header[1], "constant") {
		t.Fatalf("the record types table's columns are %q, want type, constant, ...", tb.header)
	}
	inDoc := map[string]int{}
	for r, row := range tb.rows {
		n, err := strconv.Atoi(row[0])
		if err != nil {
			t.Errorf("line %d: type %q is not a number", tb.rowLines[r], row[0])
			continue
		}
		spans := codeSpans(row[1])
		if len(spans) != 1 {
			t.Errorf("line %d: constant %q, want one name in backquotes", tb.rowLines[r], row[1])
			continue
		}
		if prev, ok := inDoc[spans[0]]; ok {
			t.Errorf("line %d: constant %s listed twice (also as type %d)", tb.rowLines[r], spans[0], prev)
		}
		inDoc[spans[0]] = n
	}
	for name, n := range code {
		got, ok := inDoc[name]
		switch {
		case !ok:
			t.Errorf("the code defines record type %s = %d; architecture.md's \"Record types\" has no row for it", name, n)
		case got != n:
			t.Errorf("record type %s is %d in the code and %d in architecture.md", name, n, got)
		}
	}
	for name, n := range inDoc {
		if _, ok := code[name]; !ok {
			t.Errorf("architecture.md lists record type %s = %d, which the code does not define", name, n)
		}
	}
}

// goDirs lists the directories below the repository's top that hold Go
// files, as slash paths relative to it. Hidden directories, testdata,
// vendor and node_modules hold no package of ours.
func goDirs(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != repoRoot && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the repository: %v", err)
	}
	return out
}

// TestPackageTableMatchesDirectories holds architecture.md's package table
// to the tree: every directory with Go files has a row, every row names a
// path that exists, and the "binary" column says what the shipped binary
// links (go list -deps ./cmd/hourglass).
func TestPackageTableMatchesDirectories(t *testing.T) {
	tb := sectionTable(t, readDoc(t, "architecture.md"), "Packages")
	if len(tb.header) != 3 || tb.header[0] != "path" || tb.header[1] != "binary" {
		t.Fatalf("the package table's columns are %q, want path, binary, what it holds", tb.header)
	}
	dirs := goDirs(t)
	rows := map[string]string{}
	for r, row := range tb.rows {
		spans := codeSpans(row[0])
		if len(spans) != 1 {
			t.Errorf("line %d: path %q, want one path in backquotes", tb.rowLines[r], row[0])
			continue
		}
		p := spans[0]
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err != nil {
			t.Errorf("line %d: the package table lists %s, which does not exist (%v)", tb.rowLines[r], p, err)
		}
		if _, dup := rows[p]; dup {
			t.Errorf("line %d: %s listed twice", tb.rowLines[r], p)
		}
		if row[1] != "yes" && row[1] != "no" {
			t.Errorf("line %d: binary %q for %s, want yes or no", tb.rowLines[r], row[1], p)
		}
		rows[p] = row[1]
	}
	var missing []string
	for d := range dirs {
		if _, ok := rows[d]; !ok {
			missing = append(missing, d)
		}
	}
	sort.Strings(missing)
	for _, d := range missing {
		t.Errorf("%s holds Go files but architecture.md's \"Packages\" table has no row for it", d)
	}

	linked, err := binaryPackages()
	if err != nil {
		t.Fatalf("list the binary's packages (go list -deps ./cmd/hourglass): %v", err)
	}
	for p, bin := range rows {
		if !dirs[p] {
			continue
		}
		if want := map[bool]string{true: "yes", false: "no"}[linked[p]]; bin != want {
			t.Errorf("%s: architecture.md says binary %q, but go list -deps ./cmd/hourglass says %q", p, bin, want)
		}
	}
}

// binaryPackages lists the module's packages that the hourglass binary
// links, as paths relative to the repository's top.
func binaryPackages() (map[string]bool, error) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	cmd := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./cmd/hourglass")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, &listError{err, string(ee.Stderr)}
		}
		return nil, err
	}
	const module = "github.com/hourglass-mq/hourglass"
	m := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, module+"/"); ok {
			m[rest] = true
		}
	}
	return m, nil
}

type listError struct {
	err    error
	stderr string
}

func (e *listError) Error() string { return e.err.Error() + ": " + e.stderr }

var (
	invariantEntry = regexp.MustCompile(`(?m)^- \*\*([ESK]\d+)\.`)
	invariantCite  = regexp.MustCompile(`\binvariants? ([ESK]\d+)\b`)
	sectionCite    = regexp.MustCompile(`architecture\.md, "([^"]+)"`)
	// wrapped is a line break inside a citation, with the comment marker
	// of the next line (// or #), read as one space.
	wrapped = regexp.MustCompile(`\s*\n\s*(//|#)?\s*`)
)

// TestInvariantsAreOneList checks that architecture.md has one list of
// invariants, each name once and in order, and that every citation of an
// invariant by name ("invariant E5") and of a section by title
// (docs/architecture.md, "The consumer path") in the repository's code and
// documents names one that exists.
func TestInvariantsAreOneList(t *testing.T) {
	text := readDoc(t, "architecture.md")
	if n := strings.Count(text, "\n## Invariants\n"); n != 1 {
		t.Fatalf("architecture.md has %d \"## Invariants\" sections, want 1", n)
	}
	names := map[string]bool{}
	next := map[byte]int{'E': 1, 'S': 1, 'K': 1}
	for _, m := range invariantEntry.FindAllStringSubmatch(text, -1) {
		name := m[1]
		n, _ := strconv.Atoi(name[1:])
		if names[name] {
			t.Errorf("invariant %s is listed twice", name)
		}
		if n != next[name[0]] {
			t.Errorf("invariant %s follows %c%d: the list is numbered in order", name, name[0], next[name[0]]-1)
		}
		next[name[0]] = n + 1
		names[name] = true
	}
	if !names["E1"] {
		t.Fatal("architecture.md lists no invariant E1")
	}
	headings := regexp.MustCompile(`(?m)^#{2,3} (.+)$`).FindAllStringSubmatch(text, -1)
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".md") && !strings.HasSuffix(p, ".sh") {
			return nil
		}
		if filepath.Base(filepath.Dir(p)) == "docs" && strings.HasSuffix(p, "_test.go") {
			return nil // this package's tests name citations as examples
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// Both citations start with a fixed word: a file without it cites
		// nothing, and skipping the regular expressions there keeps the
		// walk at a second under the race detector instead of half a
		// minute (a leading \b keeps Go's regexp from searching by prefix).
		if !bytes.Contains(b, []byte("invariant")) && !bytes.Contains(b, []byte("architecture.md, ")) {
			return nil
		}
		for _, m := range invariantCite.FindAllStringSubmatch(string(b), -1) {
			if !names[m[1]] {
				t.Errorf("%s cites invariant %s, which architecture.md does not list", p, m[1])
			}
		}
		for _, m := range sectionCite.FindAllStringSubmatch(string(b), -1) {
			m[1] = wrapped.ReplaceAllString(m[1], " ")
			found := false
			for _, h := range headings {
				if strings.HasPrefix(strings.ToLower(h[1]), strings.ToLower(m[1])) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s cites architecture.md, %q, which is no section's title", p, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the repository: %v", err)
	}
}
