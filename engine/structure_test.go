package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileAndFunctionSizes holds the whole repository's non-test Go code to
// the sizes issue 8 set: no file over 500 lines, no function over 80. A
// file that grows past them is split by what its parts do, not trimmed.
func TestFileAndFunctionSizes(t *testing.T) {
	const maxFile, maxFunc = 500, 80
	root := ".."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := strings.Count(string(src), "\n"); n > maxFile {
			t.Errorf("%s: %d lines, at most %d", p, n, maxFile)
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFunc {
					t.Errorf("%s: func %s is %d lines, at most %d", p, fd.Name.Name, n, maxFunc)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEngineMethodCount keeps Engine an orchestrator (issue 28): its API,
// validation, the appends and the applies, and the lifecycle's order. A
// new step belongs to the part whose state it changes
// (docs/architecture.md, "The engine's parts"), not to Engine.
func TestEngineMethodCount(t *testing.T) {
	const most = 60
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset, n := token.NewFileSet(), 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
				if st, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := st.X.(*ast.Ident); ok && id.Name == "Engine" {
						n++
					}
				}
			}
		}
	}
	if n == 0 || n > most {
		t.Fatalf("Engine has %d methods, want 1 to %d: give the new step to the part that owns its state", n, most)
	}
}
