// Package openapispec holds the project's OpenAPI documents to the Go code
// they describe, for tests: it reads a document (ParseYAML, Load), lists
// its operations, and compares a schema with the wire type of its name
// (SchemaProblems). Package api's tests check docs/openapi.yaml with it,
// and package kafkahttp's check docs/openapi-kafka.yaml.
//
// The rules a wire type's schema must follow, so that the document says
// exactly what is sent and accepted:
//
//   - type: object and additionalProperties: false (the servers refuse
//     unknown fields, and send none);
//   - exactly the type's JSON fields (embedded structs inlined), each
//     required exactly when it has no omitempty;
//   - each of the JSON type its Go type encodes to (a struct by $ref to
//     the schema of its name; int64 with format: int64);
//   - nullable exactly when null is sent (a pointer without omitempty) or
//     accepted (an optional field of a request: the servers take null as
//     "not given").
package openapispec

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Load reads and parses the document at path.
func Load(path string) (map[string]any, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := ParseYAML(string(src))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: not a mapping", path)
	}
	return m, nil
}

// Get walks v by mapping keys; nil when a step is missing.
func Get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// Strs returns the strings of a sequence, sorted.
func Strs(v any) []string {
	var out []string
	s, _ := v.([]any)
	for _, x := range s {
		if str, ok := x.(string); ok {
			out = append(out, str)
		}
	}
	sort.Strings(out)
	return out
}

// Operations returns the document's operations as "METHOD /path", sorted
// (a path's parameters as the document spells them: {id}).
func Operations(doc map[string]any) []string {
	var ops []string
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		m, _ := item.(map[string]any)
		for method := range m {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops = append(ops, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

// field is one JSON field of a wire type.
type field struct {
	typ       reflect.Type
	omitempty bool
}

func jsonFields(t reflect.Type) map[string]field {
	out := map[string]field{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		out[name] = field{f.Type, opts == "omitempty"}
	}
	return out
}

// SchemaProblems compares the schema of typ's name in schemas (the
// document's components.schemas) with typ by the package's rules; request
// says the servers decode typ (else they encode it). It returns what
// differs, none when they agree.
func SchemaProblems(schemas map[string]any, typ reflect.Type, request bool) []string {
	var out []string
	errorf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	name := typ.Name()
	s, ok := schemas[name].(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("schema %s is missing", name)}
	}
	if s["type"] != "object" || s["additionalProperties"] != "false" {
		errorf("schema %s: want type: object and additionalProperties: false", name)
	}
	fields := jsonFields(typ)
	props, _ := s["properties"].(map[string]any)
	var required []string
	for fname, f := range fields {
		if !f.omitempty {
			required = append(required, fname)
		}
		p, ok := props[fname].(map[string]any)
		if !ok {
			errorf("schema %s lacks property %s", name, fname)
			continue
		}
		nullable := f.typ.Kind() == reflect.Pointer && !f.omitempty || request && f.omitempty
		checkType(errorf, name+"."+fname, p, f.typ, nullable)
	}
	for pname := range props {
		if _, ok := fields[pname]; !ok {
			errorf("schema %s has property %s, which %s lacks", name, pname, name)
		}
	}
	sort.Strings(required)
	if got := Strs(s["required"]); !slices.Equal(got, required) {
		errorf("schema %s: required %v; the type requires %v", name, got, required)
	}
	return out
}

// checkType compares one property with the Go type of its field.
func checkType(errorf func(string, ...any), where string, p map[string]any, typ reflect.Type, nullable bool) {
	if got := p["nullable"] == "true"; got != nullable {
		errorf("%s: nullable is %v, want %v", where, got, nullable)
	}
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() == reflect.Struct {
		if ref := "#/components/schemas/" + typ.Name(); p["$ref"] != ref {
			errorf("%s: want $ref %s, got %v", where, ref, p["$ref"])
		}
		return
	}
	want := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer",
		reflect.Int32: "integer", reflect.Int64: "integer", reflect.Uint64: "integer", reflect.Float64: "number",
		reflect.Slice: "array", reflect.Map: "object"}[typ.Kind()]
	if p["type"] != want {
		errorf("%s: type %v, want %s (Go %s)", where, p["type"], want, typ)
	}
	if (typ.Kind() == reflect.Int64 || typ.Kind() == reflect.Uint64) && p["format"] != "int64" {
		errorf("%s: a 64-bit integer wants format: int64", where)
	}
	switch typ.Kind() {
	case reflect.Slice:
		items, _ := p["items"].(map[string]any)
		checkType(errorf, where+"[]", items, typ.Elem(), false)
	case reflect.Map:
		add, _ := p["additionalProperties"].(map[string]any)
		checkType(errorf, where+"{}", add, typ.Elem(), false)
	}
}

// DocumentProblems checks a document's schemas against the wire types a
// server decodes (requests) and encodes (responses) by SchemaProblems, and
// that it has no schema of another name.
func DocumentProblems(schemas map[string]any, requests, responses []any) []string {
	var out []string
	checked := map[string]bool{}
	for _, list := range []struct {
		types   []any
		request bool
	}{{requests, true}, {responses, false}} {
		for _, v := range list.types {
			typ := reflect.TypeOf(v)
			checked[typ.Name()] = true
			out = append(out, SchemaProblems(schemas, typ, list.request)...)
		}
	}
	for name := range schemas {
		if !checked[name] {
			out = append(out, fmt.Sprintf("schema %s has no wire type", name))
		}
	}
	sort.Strings(out)
	return out
}

// TB is the part of testing.TB that LoadOrFail needs (the package does not
// import testing, so that it is no test-only dependency of what imports it).
type TB interface {
	Helper()
	Fatal(args ...any)
}

// LoadOrFail is Load for a test: a document that cannot be read or parsed
// fails it.
func LoadOrFail(t TB, path string) map[string]any {
	t.Helper()
	doc, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
