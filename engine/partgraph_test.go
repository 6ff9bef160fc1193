package engine

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"sort"
	"strings"
	"testing"
)

// partCalls is the fixed graph of calls between the engine's parts
// (docs/architecture.md, "The engine's parts"): part A may call part B,
// through a field, a local or a parameter of B's type, only if B is listed
// under A. It is a DAG, and it is exact: an arrow listed that the code no
// longer makes fails too, so that the table stays the true picture.
// Engine is the root that orchestrates them all and is no entry: a part
// calls the Engine only while it is listed in holdsEngine. Browser and
// DeadLetters are faces of the Engine's API (they hold it by design, and no
// part calls them).
var partCalls = map[string][]string{
	"Browser":      {"catalog", "consumers", "dispatcher", "lifecycle", "overlayState"},
	"DeadLetters":  {"catalog", "consumers", "dispatcher", "lifecycle"},
	"recovery":     {"catalog", "consumers", "damageState", "dispatcher", "overlayState", "segTable"},
	"checkpointer": {"catalog", "consumers", "dispatcher", "lifecycle", "overlayState", "segTable"},
	"consumers":    {"catalog", "damageState", "dispatcher", "lifecycle", "segTable"},
	"dispatcher":   {"lifecycle", "overlayState", "segTable"},
	"catalog":      {"lifecycle"},
	"scrubState":   {"damageState", "lifecycle"},
	"dedupClaims":  {"dispatcher", "overlayState", "segTable"},
	"lifecycle":    nil,
	"overlayState": {"segTable"},
	"segTable":     nil,
	"damageState":  nil,
}

// holdsEngine lists the parts that still hold the *Engine back-pointer
// and call it: the work of issue 28 left. Every other part of partCalls
// holds no *Engine, takes none and reaches none: it is given, at Open, the
// narrow things it needs (the lock, the clock, the options, the log, the
// parts below it), and a part that regains a back-pointer fails
// TestPartsHoldNoEngine.
var holdsEngine = []string{"Browser", "DeadLetters"}

// TestPartsHoldNoEngine: the parts not in holdsEngine have no field of
// type Engine or *Engine, no method of theirs takes or returns one, and
// none reaches the Engine; each part of the table exists.
func TestPartsHoldNoEngine(t *testing.T) {
	fset, files := packageFiles(t)
	fields := structFields(files)
	for part := range partCalls {
		if fields[part] == nil {
			t.Errorf("part %s: no struct type of that name", part)
		}
	}
	bad := engineHolders(fset, files, partCalls, holdsEngine)
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("%d parts hold no *Engine; %d still do: %v", len(partCalls)-len(holdsEngine), len(holdsEngine), holdsEngine)
}

// TestPartCallsFormTheDAG: the calls between parts are exactly the arrows
// of partCalls, and partCalls has no cycle.
func TestPartCallsFormTheDAG(t *testing.T) {
	fset, files := packageFiles(t)
	for _, b := range graphViolations(fset, files, partCalls) {
		t.Error(b)
	}
	if c := dagCycle(partCalls); c != nil {
		t.Errorf("partCalls has a cycle: %s", strings.Join(c, " -> "))
	}
}

// engineHolders lists, for each part not in holding, its fields of type
// Engine and its arrows to the Engine.
func engineHolders(fset *token.FileSet, files map[string]*ast.File, table map[string][]string, holding []string) []string {
	var bad []string
	fields := structFields(files)
	for part := range table {
		if slices.Contains(holding, part) {
			continue
		}
		for name, tn := range fields[part] {
			if tn == "Engine" {
				bad = append(bad, fmt.Sprintf("part %s: field %s holds the Engine: give the part what it needs instead", part, name))
			}
		}
	}
	for arrow, at := range partArrows(fset, files, tableParts(table)) {
		from, to, _ := strings.Cut(arrow, " -> ")
		if to == "Engine" && !slices.Contains(holding, from) {
			bad = append(bad, fmt.Sprintf("%s: part %s reaches the Engine (%d places)", at[0], from, len(at)))
		}
	}
	sort.Strings(bad)
	return bad
}

// graphViolations lists the arrows between parts that table does not
// list, and those it lists that the code does not make.
func graphViolations(fset *token.FileSet, files map[string]*ast.File, table map[string][]string) []string {
	var bad []string
	arrows := partArrows(fset, files, tableParts(table))
	for arrow, at := range arrows {
		from, to, _ := strings.Cut(arrow, " -> ")
		if to != "Engine" && !slices.Contains(table[from], to) {
			bad = append(bad, fmt.Sprintf("%s: %s calls %s, an arrow partCalls does not list (%d places)", at[0], from, to, len(at)))
		}
	}
	for from, tos := range table {
		for _, to := range tos {
			if arrows[from+" -> "+to] == nil {
				bad = append(bad, fmt.Sprintf("partCalls lists %s -> %s, which the code no longer makes: remove it", from, to))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// dagCycle returns a cycle of table's arrows, or nil.
func dagCycle(table map[string][]string) []string {
	state := map[string]int{} // 0 new, 1 on the path, 2 done
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		switch state[n] {
		case 1:
			i := slices.Index(path, n)
			return append(slices.Clone(path[i:]), n)
		case 2:
			return nil
		}
		state[n] = 1
		path = append(path, n)
		for _, m := range table[n] {
			if c := visit(m); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[n] = 2
		return nil
	}
	for _, n := range tableParts(table) {
		if c := visit(n); c != nil {
			return c
		}
	}
	return nil
}

// tableParts is the parts table names, sorted.
func tableParts(table map[string][]string) []string {
	var out []string
	for p := range table {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// packageFiles parses the package's non-test files: the graph is the
// product's, and tests may reach into any part.
func packageFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) { return parseDir(t, false) }

// structFields maps each struct type of files to its fields' type names
// (T for T and *T; "" for other types).
func structFields(files map[string]*ast.File) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			fs := map[string]string{}
			for _, fl := range st.Fields.List {
				tn := typeName(fl.Type)
				for _, nm := range fl.Names {
					fs[nm.Name] = tn
				}
				if len(fl.Names) == 0 {
					fs[tn] = tn // embedded
				}
			}
			out[ts.Name.Name] = fs
			return true
		})
	}
	return out
}

// typeName is the name of a type expression T or *T, or "".
func typeName(x ast.Expr) string {
	if st, ok := x.(*ast.StarExpr); ok {
		x = st.X
	}
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// partArrows lists the calls between parts in files, as "A -> B" with the
// places that make them: a method of part A (by its receiver) that reaches
// part B (or Engine) through a field, a local bound to such a field, or a
// parameter of B's type.
func partArrows(fset *token.FileSet, files map[string]*ast.File, parts []string) map[string][]string {
	fields := structFields(files)
	isNode := func(tn string) bool { return tn == "Engine" || slices.Contains(parts, tn) }
	arrows := map[string][]string{}
	add := func(from, to string, at token.Pos) {
		if from != to {
			k := from + " -> " + to
			arrows[k] = append(arrows[k], fset.Position(at).String())
		}
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			from := funcPart(fd, parts)
			if from == "" {
				continue
			}
			vars := map[string]string{} // name -> its type
			if fd.Recv != nil {
				for _, nm := range fd.Recv.List[0].Names {
					vars[nm.Name] = from
				}
			}
			for _, fl := range fieldLists(fd.Type.Params, fd.Type.Results) {
				if tn := typeName(fl.Type); isNode(tn) {
					add(from, tn, fl.Pos())
					for _, nm := range fl.Names {
						vars[nm.Name] = tn
					}
				}
			}
			// chain resolves x.a.b... to its type, reporting the nodes it
			// passes through.
			var chain func(x ast.Expr) string
			chain = func(x ast.Expr) string {
				switch x := x.(type) {
				case *ast.Ident:
					return vars[x.Name]
				case *ast.SelectorExpr:
					base := chain(x.X)
					tn := fields[base][x.Sel.Name]
					if base != "" && isNode(tn) {
						add(from, tn, x.Pos())
					}
					if base == "Engine" && tn == "" {
						add(from, "Engine", x.Pos()) // a method or a plain field of Engine
					}
					return tn
				}
				return ""
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					for i, rhs := range n.Rhs {
						if tn := chain(rhs); tn != "" && i < len(n.Lhs) && len(n.Lhs) == len(n.Rhs) {
							if id, ok := n.Lhs[i].(*ast.Ident); ok {
								vars[id.Name] = tn
							}
						}
					}
					return true
				case *ast.ValueSpec:
					if tn := typeName(n.Type); isNode(tn) {
						for _, nm := range n.Names {
							vars[nm.Name] = tn
						}
					}
				case *ast.SelectorExpr:
					chain(n)
					return false
				}
				return true
			})
		}
	}
	return arrows
}

// funcPart is the part a function belongs to: its receiver's type, or,
// for a function without one, the part it returns (a constructor), or "".
func funcPart(fd *ast.FuncDecl, parts []string) string {
	if fd.Recv != nil {
		if len(fd.Recv.List) == 1 && slices.Contains(parts, typeName(fd.Recv.List[0].Type)) {
			return typeName(fd.Recv.List[0].Type)
		}
		return ""
	}
	if fd.Type.Results != nil {
		for _, fl := range fd.Type.Results.List {
			if tn := typeName(fl.Type); slices.Contains(parts, tn) {
				return tn
			}
		}
	}
	return ""
}

// TestPartGraphCatchesPlants makes sure both rules can fail: a part given
// a back-pointer, or reaching the Engine or a part its row does not list
// (through the Engine, a field, a local or a parameter), is refused, and so
// is a cycle or a stale arrow in the table.
func TestPartGraphCatchesPlants(t *testing.T) {
	const base = `package engine
type Engine struct{ disp *dispatcher; cons *consumers }
type consumers struct{ disp *dispatcher }
func (c *consumers) lease() { c.disp.tick() }
`
	table := map[string][]string{"consumers": {"dispatcher"}, "dispatcher": nil}
	cases := []struct {
		name, src     string
		holder, graph int
	}{
		{"clean", `type dispatcher struct{ n int }
func (d *dispatcher) tick() {}`, 0, 0},
		{"a back-pointer", `type dispatcher struct{ n int; eng *Engine }
func (d *dispatcher) tick() {}`, 1, 0},
		{"a call through the back-pointer", `type dispatcher struct{ eng *Engine }
func (d *dispatcher) tick() { d.eng.cons.lease() }`, 2, 1},
		{"an Engine parameter", `type dispatcher struct{}
func (d *dispatcher) tick(e *Engine) {}`, 1, 0},
		{"a constructor given the Engine", `type dispatcher struct{ n int }
func (d *dispatcher) tick() {}
func newDispatcher(e *Engine) *dispatcher { return &dispatcher{n: e.cons.n()} }`, 1, 1},
		{"a call through a local", `type dispatcher struct{ c *consumers }
func (d *dispatcher) tick() { c := d.c; c.lease() }`, 0, 1},
		{"a part parameter", `type dispatcher struct{}
func (d *dispatcher) tick() {}
func (d *dispatcher) hand(c *consumers) {}`, 0, 1},
	}
	for _, c := range cases {
		fset, files := parseSources(t, map[string]string{"engine.go": base, "dispatcher.go": "package engine\n" + c.src})
		if got := engineHolders(fset, files, table, nil); len(got) != c.holder {
			t.Errorf("%s: engine holders %q, want %d", c.name, got, c.holder)
		}
		if got := graphViolations(fset, files, table); len(got) != c.graph {
			t.Errorf("%s: graph violations %q, want %d", c.name, got, c.graph)
		}
		if c.name == "clean" {
			stale := map[string][]string{"consumers": {"dispatcher"}, "dispatcher": {"consumers"}}
			if got := graphViolations(fset, files, stale); len(got) != 1 {
				t.Errorf("a stale arrow: %q, want 1 violation", got)
			}
			if dagCycle(stale) == nil {
				t.Errorf("a cycle in %v not found", stale)
			}
		}
	}
	if c := dagCycle(table); c != nil {
		t.Errorf("no cycle in %v, found %v", table, c)
	}
}
