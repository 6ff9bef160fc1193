package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestEngineFieldCount keeps Engine an orchestrator: every piece of state
// belongs to an owner type (docs/architecture.md, "The engine's parts"),
// and Engine holds at most 15 fields, the owners and the few things every
// part shares. A new field should join an owner, not Engine.
func TestEngineFieldCount(t *testing.T) {
	const most = 15
	if n := reflect.TypeFor[Engine]().NumField(); n > most {
		t.Fatalf("Engine has %d fields, at most %d: put the new state under its owner type", n, most)
	}
}

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
