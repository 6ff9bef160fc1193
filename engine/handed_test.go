package engine

import (
	"go/ast"
	"go/token"
	"slices"
	"sort"
	"testing"
)

// handedDown lists the functions that are handed to a part instead of
// called: a method of the Engine or of a part, taken as a value by code
// that is not its own type's. Each is an arrow the part graph
// (partCalls) cannot see, so each is written here with where it goes and
// why, and TestHandedDownFunctions fails on one that is not.
var handedDown = map[string]string{
	"Engine.loop":                "the lifecycle starts it (startBackground)",
	"checkpointer.run":           "the lifecycle starts it (startBackground)",
	"scrubState.scrubber":        "the lifecycle starts it (startBackground)",
	"Engine.applyMessageLocked":  "the consumers apply a dead letter's copy with it, recovery replays with it",
	"Engine.applyFireLocked":     "recovery replays with it (replayApply)",
	"Engine.applyChangeLocked":   "recovery replays with it (replayApply)",
	"Engine.readStored":          "windowMissed reads late windowed messages with it",
	"consumers.timerEndedLocked": "the dispatcher's lease wheel hands the consumers' ended timers back (Engine.loop)",
	"segTable.segmentOf":         "the damage record names the segment of a record a queue read passed over",
}

// TestHandedDownFunctions: every method value of the Engine or of a part
// taken outside its own type's methods is listed in handedDown, and every
// entry there is still taken somewhere.
func TestHandedDownFunctions(t *testing.T) {
	fset, files := packageFiles(t)
	got := handedFunctions(fset, files, tableParts(partCalls))
	for name, at := range got {
		if _, ok := handedDown[name]; !ok {
			t.Errorf("%s: %s is handed on as a function (%d places), a hidden arrow handedDown does not list", at[0], name, len(at))
		}
	}
	for name := range handedDown {
		if got[name] == nil {
			t.Errorf("handedDown lists %s, which nothing hands on any more: remove it", name)
		}
	}
}

// TestHandedDownCatchesPlant: a part's method taken as a value by another
// type, or the Engine's taken by the Engine, is found, whichever way the
// value is reached; a call is not.
func TestHandedDownCatchesPlant(t *testing.T) {
	const src = `package engine
type Engine struct{ cons *consumers; disp *dispatcher }
type consumers struct{}
func (c *consumers) ended(int) {}
type dispatcher struct{ on func(int) }
func (d *dispatcher) tick(f func(int)) { d.on = f }
func (e *Engine) handle(int) {}
func (e *Engine) wire() { e.disp.tick(e.cons.ended); e.cons.ended(1); e.disp.tick(e.handle); e.handle(2) }
func open() { e := &Engine{}; c := e.cons; e.disp.on = c.ended; e.wire() }
`
	fset, files := parseSources(t, map[string]string{"engine.go": src})
	got := handedFunctions(fset, files, []string{"consumers", "dispatcher"})
	if len(got) != 2 || len(got["consumers.ended"]) != 2 || len(got["Engine.handle"]) != 1 {
		t.Errorf("handed functions %v, want consumers.ended twice and Engine.handle once", got)
	}
}

// handedFunctions finds the method values of Engine and of parts taken
// outside their own type's methods, by "Type.method", with where.
func handedFunctions(fset *token.FileSet, files map[string]*ast.File, parts []string) map[string][]string {
	fields := structFields(files)
	methods := map[string]map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
				tn := typeName(fd.Recv.List[0].Type)
				if methods[tn] == nil {
					methods[tn] = map[string]bool{}
				}
				methods[tn][fd.Name.Name] = true
			}
		}
	}
	isNode := func(tn string) bool { return tn == "Engine" || slices.Contains(parts, tn) }
	out := map[string][]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			owner, vars := "", map[string]string{}
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				owner = typeName(fd.Recv.List[0].Type)
				for _, nm := range fd.Recv.List[0].Names {
					vars[nm.Name] = owner
				}
			}
			for _, fl := range fieldLists(fd.Type.Params) {
				for _, nm := range fl.Names {
					vars[nm.Name] = typeName(fl.Type)
				}
			}
			var typeOf func(x ast.Expr) string
			typeOf = func(x ast.Expr) string {
				switch x := x.(type) {
				case *ast.Ident:
					return vars[x.Name]
				case *ast.SelectorExpr:
					return fields[typeOf(x.X)][x.Sel.Name]
				case *ast.UnaryExpr:
					return typeOf(x.X)
				case *ast.CompositeLit:
					return typeName(x.Type)
				}
				return ""
			}
			called := map[ast.Expr]bool{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					called[n.Fun] = true
				case *ast.AssignStmt:
					if len(n.Lhs) == len(n.Rhs) {
						for i, rhs := range n.Rhs {
							if id, ok := n.Lhs[i].(*ast.Ident); ok {
								if tn := typeOf(rhs); tn != "" {
									vars[id.Name] = tn
								}
							}
						}
					}
				case *ast.SelectorExpr:
					if called[n] {
						return true
					}
					// The Engine's own methods count when the Engine takes
					// them too: it takes them to hand them to a part.
					if base := typeOf(n.X); isNode(base) && (base != owner || base == "Engine") && methods[base][n.Sel.Name] {
						k := base + "." + n.Sel.Name
						out[k] = append(out[k], fset.Position(n.Pos()).String())
					}
				}
				return true
			})
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}
