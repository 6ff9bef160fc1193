package kafkamode

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// workerParts names the parts of Worker (its doc comment) by type, and the
// files that are each part's own: the only files whose code may read or
// write the part's fields. The rest of the package asks a part through
// its methods. Test files are white-box and not checked.
var workerParts = map[string][]string{
	"session":   {"session.go", "settle.go", "fence.go"},
	"partTable": {"parttable.go"},
	"loopIndex": {"loopindex.go", "loop.go", "spillindex.go", "deferral.go", "query.go", "warm.go"},
}

// TestWorkerPartsOwnTheirFields is issue 28's ownership rule for Kafka
// mode's worker: no code outside a part's files selects a field of the
// part's type, by whatever path (w.ses.gts, a local, a parameter), and no
// composite literal of a part's type is written outside them. It
// type-checks the package's non-test files, so a field is recognised by
// its type, not its name.
func TestWorkerPartsOwnTheirFields(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]string{}
	for _, n := range names {
		if !strings.HasSuffix(n, "_test.go") {
			srcs[n] = ""
		}
	}
	bad, err := partViolations(srcs, workerParts)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestOwnershipCheckCatchesPlantedAccess: the check refuses a planted
// access to a part's field from another file, whichever way it reaches
// the part, and allows a method call.
func TestOwnershipCheckCatchesPlantedAccess(t *testing.T) {
	const decls = `package kafkamode
type partTable struct{ n int }
func (t *partTable) count() int { return t.n }
type Worker struct{ parts partTable }
`
	cases := []struct {
		name, src string
		bad       int
	}{
		{"through the holding field", `func (w *Worker) f() { w.parts.n = 1 }`, 1},
		{"through a local", `func (w *Worker) f() int { p := &w.parts; return p.n }`, 1},
		{"through a parameter", `func f(p *partTable) int { return p.n + p.n }`, 2},
		{"in a composite literal", `func f() partTable { return partTable{n: 1} }`, 1},
		{"a method is allowed", `func (w *Worker) f() int { return w.parts.count() }`, 0},
	}
	for _, c := range cases {
		srcs := map[string]string{"parttable.go": decls, "txn.go": "package kafkamode\n" + c.src}
		got, err := partViolations(srcs, map[string][]string{"partTable": {"parttable.go"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.bad {
			t.Errorf("%s: %d violations %q, want %d", c.name, len(got), got, c.bad)
		}
		got, err = partViolations(srcs, map[string][]string{"partTable": {"parttable.go", "txn.go"}})
		if err != nil || len(got) != 0 {
			t.Errorf("%s in the part's own file: %q (%v), want none", c.name, got, err)
		}
	}
}

// partViolations type-checks the files (name -> source; "" reads the
// file) and lists, as "file:line: ...", each use of a part's field
// outside its files.
func partViolations(srcs map[string]string, parts map[string][]string) ([]string, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for name, src := range srcs {
		var s any
		if src != "" {
			s = src
		}
		f, err := parser.ParseFile(fset, name, s, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Types: map[ast.Expr]types.TypeAndValue{}}
	exports, err := exportData()
	if err != nil {
		return nil, err
	}
	lookup := func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s in go list -export", path)
		}
		return os.Open(f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	if _, err := conf.Check("kafkamode", fset, files, info); err != nil {
		return nil, err
	}
	partOf := func(t types.Type) string {
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok && parts[n.Obj().Name()] != nil {
			return n.Obj().Name()
		}
		return ""
	}
	var bad []string
	report := func(pos token.Pos, part, what string) {
		file := filepath.Base(fset.Position(pos).Filename)
		if !slices.Contains(parts[part], file) {
			bad = append(bad, fmt.Sprintf("%s: %s of %s used outside the part's files", fset.Position(pos), what, part))
		}
	}
	for sel, s := range info.Selections {
		if s.Kind() == types.FieldVal {
			if part := partOf(s.Recv()); part != "" {
				report(sel.Sel.Pos(), part, "field "+sel.Sel.Name)
			}
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if cl, ok := n.(*ast.CompositeLit); ok {
				if part := partOf(info.Types[cl].Type); part != "" {
					report(cl.Pos(), part, "a composite literal")
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad, nil
}

var exportOnce = sync.OnceValues(func() (map[string]string, error) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}={{.Export}}{{end}}", ".").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("go list -export: %v\n%s", err, stderr)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok {
			m[path] = file
		}
	}
	return m, nil
})

// exportData maps each package this one imports, directly or not, to its
// compiled export data, which go list -export takes from the build cache
// (go vet, which make test runs first, has put it there). Type-checking
// the imports from source instead took two minutes under the race
// detector on a loaded 2-core machine, for the same answer.
func exportData() (map[string]string, error) { return exportOnce() }
