package engine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// partFiles names each part of the engine (docs/architecture.md, "The
// engine's parts"), by its type, and the files that are its own: the only
// files whose code may read or write the part's fields. Everything else
// asks the part through its methods. A test file belongs to a part when it
// is named here too.
var partFiles = map[string][]string{
	// The dispatcher's white-box tests (rate, staging, sharing, herd
	// memory, the settled state) are its own.
	"dispatcher": {"dispatcher.go", "dispatch.go", "dispatchtimers.go", "dispatchchange.go", "dueheap.go", "near.go", "share.go",
		"dispatcher_peek_test.go", "burst_test.go", "stage_test.go", "share_test.go", "herdmem_test.go", "settle_test.go", "firebuf_test.go"},
	"overlayState": {"overlaystate.go", "overlay.go"},
	"segTable":     {"segtable.go"},
	"lifecycle":    {"lifecycle.go", "fail.go", "lifecycle_peek_test.go"},
	"consumers": {"consumers.go", "group.go", "receive.go", "ack.go", "expire.go", "deadletter.go", "describe.go", "readbatch.go", "forgroup.go", "redrive.go",
		"browse_groups.go", "deadletter_admin.go", "groupadmin.go",
		"consumers_peek_test.go"},
	// Recovery's timer count and set-aside replay live beside the
	// forecast and the damage record they rebuild; the recount benchmark
	// is its white-box test.
	"recovery":     {"recover.go", "replay.go", "forecast.go", "damage.go", "forecast_bench_test.go"},
	"catalog":      {"catalog.go", "send.go", "prepare.go", "forecast.go"},
	"checkpointer": {"checkpoint.go", "ckptbytes.go", "trickle.go", "retain.go", "compact.go", "backup.go"},
	"scrubState":   {"scrub.go"},
	"dedupClaims":  {"dedup.go"},
	"damageState":  {"damage.go"},
}

// TestPartsOwnTheirFields is the ownership rule of issue 28: no code
// outside a part's own files touches that part's fields, through a field
// that holds the part (e.disp.wheel), through a variable, parameter or
// receiver of the part's type (d := e.disp; d.wheel), or in a composite
// literal of the part's type. Methods of a part may be called from
// anywhere: they are its face.
func TestPartsOwnTheirFields(t *testing.T) {
	fset, files := parseDir(t, true)
	for part, own := range partFiles {
		for _, n := range own {
			if _, ok := files[n]; !ok && !strings.HasSuffix(n, "_test.go") {
				t.Errorf("part %s: its file %s does not exist", part, n)
			}
		}
	}
	bad := ownershipViolations(fset, files, partFiles)
	for _, b := range bad {
		t.Error(b)
	}
	if len(bad) > 0 {
		t.Logf("%d accesses to a part's fields outside its files: move the code into a method of the part", len(bad))
	}
}

// TestOwnershipCheckCatchesPlantedAccess makes sure the rule can fail: the
// same access is refused outside the part's files and allowed in them,
// whichever way it reaches the part.
func TestOwnershipCheckCatchesPlantedAccess(t *testing.T) {
	const decls = `package engine
type dispatcher struct{ wheel int; near map[int]int }
func (d *dispatcher) len() int { return d.wheel }
type Engine struct{ disp *dispatcher }
`
	cases := []struct {
		name, src string
		bad       int
	}{
		{"through the holding field", `func (e *Engine) f() { e.disp.wheel = 1 }`, 1},
		{"through a local", `func (e *Engine) f() int { d := e.disp; return d.wheel }`, 1},
		{"through a parameter", `func f(d *dispatcher) int { return d.wheel + len(d.near) }`, 2},
		{"in a composite literal", `func f() *dispatcher { return &dispatcher{wheel: 1} }`, 1},
		{"a method is allowed", `func (e *Engine) f() int { return e.disp.len() }`, 0},
	}
	for _, c := range cases {
		for _, own := range []bool{false, true} {
			fset, files := parseSources(t, map[string]string{"dispatcher.go": decls, "send.go": "package engine\n" + c.src})
			parts := map[string][]string{"dispatcher": {"dispatcher.go"}}
			want := c.bad
			if own {
				parts["dispatcher"] = append(parts["dispatcher"], "send.go")
				want = 0
			}
			if got := ownershipViolations(fset, files, parts); len(got) != want {
				t.Errorf("%s (send.go own: %v): %d violations %q, want %d", c.name, own, len(got), got, want)
			}
		}
	}
}

// parseDir parses the package's Go files, its tests too if tests.
func parseDir(t *testing.T, tests bool) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]string{}
	for _, n := range names {
		if tests || !strings.HasSuffix(n, "_test.go") {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			srcs[n] = string(b)
		}
	}
	return parseSources(t, srcs)
}

// parseSources parses Go sources by file name.
func parseSources(t *testing.T, srcs map[string]string) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for name, src := range srcs {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return fset, files
}

// ownershipViolations lists, as "file:line: ...", every access to a part's
// field outside the part's files.
func ownershipViolations(fset *token.FileSet, files map[string]*ast.File, parts map[string][]string) []string {
	fields := map[string]map[string]bool{} // part type -> its field names
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || parts[ts.Name.Name] == nil {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				fields[ts.Name.Name] = map[string]bool{}
				for _, fl := range st.Fields.List {
					for _, nm := range fl.Names {
						fields[ts.Name.Name][nm.Name] = true
					}
				}
			}
			return true
		})
	}
	// holders: struct fields whose type is a part (Engine.disp, say).
	holders := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if st, ok := n.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					if p := partOf(fl.Type, parts); p != "" {
						for _, nm := range fl.Names {
							holders[nm.Name] = p
						}
					}
				}
			}
			return true
		})
	}
	var bad []string
	report := func(n ast.Node, part, field string) {
		bad = append(bad, fmt.Sprintf("%s: %s.%s touched outside the part's files", fset.Position(n.Pos()), part, field))
	}
	for name, f := range files {
		for part, own := range parts {
			if slices.Contains(own, name) {
				continue
			}
			checkFileForPart(f, part, fields[part], holders, parts, report)
		}
	}
	sort.Strings(bad)
	return bad
}

// checkFileForPart reports the accesses to part's fields in f.
func checkFileForPart(f *ast.File, part string, fields map[string]bool, holders map[string]string, parts map[string][]string, report func(ast.Node, string, string)) {
	for _, decl := range f.Decls {
		vars := map[string]bool{} // names of this function bound to the part
		if fd, ok := decl.(*ast.FuncDecl); ok {
			for _, fl := range fieldLists(fd.Recv, fd.Type.Params, fd.Type.Results) {
				if partOf(fl.Type, parts) == part {
					for _, nm := range fl.Names {
						vars[nm.Name] = true
					}
				}
			}
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, rhs := range n.Rhs {
					if i < len(n.Lhs) && holdsPart(rhs, part, holders) {
						if id, ok := n.Lhs[i].(*ast.Ident); ok {
							vars[id.Name] = true
						}
					}
				}
			case *ast.ValueSpec:
				if partOf(n.Type, parts) == part {
					for _, nm := range n.Names {
						vars[nm.Name] = true
					}
				}
				for i, v := range n.Values {
					if i < len(n.Names) && holdsPart(v, part, holders) {
						vars[n.Names[i].Name] = true
					}
				}
			case *ast.CompositeLit:
				if partOf(n.Type, parts) == part {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if id, ok := kv.Key.(*ast.Ident); ok {
								report(kv, part, id.Name)
							}
						}
					}
				}
			case *ast.SelectorExpr:
				if !fields[n.Sel.Name] {
					return true
				}
				if holdsPart(n.X, part, holders) {
					report(n, part, n.Sel.Name)
				} else if id, ok := n.X.(*ast.Ident); ok && vars[id.Name] {
					report(n, part, n.Sel.Name)
				}
			}
			return true
		})
	}
}

// holdsPart reports whether x is a selector of a field that holds part.
func holdsPart(x ast.Expr, part string, holders map[string]string) bool {
	sel, ok := x.(*ast.SelectorExpr)
	return ok && holders[sel.Sel.Name] == part
}

// partOf returns the part that the type expression names (T or *T), or "".
func partOf(x ast.Expr, parts map[string][]string) string {
	if st, ok := x.(*ast.StarExpr); ok {
		x = st.X
	}
	if id, ok := x.(*ast.Ident); ok && parts[id.Name] != nil {
		return id.Name
	}
	return ""
}

func fieldLists(ls ...*ast.FieldList) []*ast.Field {
	var out []*ast.Field
	for _, l := range ls {
		if l != nil {
			out = append(out, l.List...)
		}
	}
	return out
}
