package server

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// The OpenAPI document is YAML and the standard library has no YAML
// parser, so this test reads the two parts it checks with a line-based
// reader that relies on the document's two-space indentation:
//
//   - the operations: every method+path the server routes is documented,
//     and every documented operation is routed.
//
// The schemas are checked against the wire types by package api's tests.

const openapiFile = "../docs/openapi.yaml"

// yamlKey returns the key of a "key:" line with exactly indent spaces.
func yamlKey(line string, indent int) (string, bool) {
	if len(line) <= indent || strings.TrimLeft(line[:indent], " ") != "" || line[indent] == ' ' || line[indent] == '#' {
		return "", false
	}
	k, _, ok := strings.Cut(line[indent:], ":")
	if !ok || strings.HasPrefix(k, "- ") {
		return "", false
	}
	return strings.Trim(k, `"`), true
}

// readOpenAPI returns the documented operations ("METHOD /path").
func readOpenAPI(t *testing.T) (ops []string) {
	t.Helper()
	f, err := os.Open(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var section, path string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if k, ok := yamlKey(line, 0); ok {
			section = k
			continue
		}
		if section != "paths" {
			continue
		}
		if k, ok := yamlKey(line, 2); ok {
			path = k
		} else if k, ok := yamlKey(line, 4); ok {
			switch k {
			case "get", "put", "post", "delete", "patch", "head":
				ops = append(ops, strings.ToUpper(k)+" "+path)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ops
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	ops := readOpenAPI(t)
	documented := map[string]bool{}
	for _, op := range ops {
		if documented[op] {
			t.Errorf("%s is documented twice", op)
		}
		documented[op] = true
	}
	routed := map[string]bool{}
	for _, rt := range routes {
		op := rt.method + " " + rt.path
		routed[op] = true
		if !documented[op] {
			t.Errorf("%s is served but not documented in %s", op, openapiFile)
		}
	}
	for op := range documented {
		if !routed[op] {
			t.Errorf("%s is documented but not served", op)
		}
	}
	if len(routes) < 19 {
		t.Fatalf("only %d routes", len(routes))
	}
}
