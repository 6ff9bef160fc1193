package api

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

const openapiFile = "../docs/openapi.yaml"

// requests are the types the server decodes: it refuses unknown fields,
// and takes null for an optional field as "not given" (so the document
// marks every optional request field nullable).
var requests = []any{SendMessage{}, BatchRequest{}, RescheduleRequest{}, TopicConfig{}, GroupConfig{},
	ReceiveRequest{}, AckRequest{}, NackRequest{}, InvisibilityRequest{}, RedriveRequest{},
	BackupRequest{}}

// responses are the types the server encodes.
var responses = []any{Receipt{}, BatchReceipts{}, MessageInfo{}, Cancelled{}, Rescheduled{}, Topic{}, TopicList{},
	Group{}, GroupList{}, ReceivedMessage{}, ReceiveResponse{}, AckResponse{}, RedriveResponse{}, Empty{}, Health{},
	Stats{}, Error{}, ErrorBody{}, Forecast{}, ForecastBucket{}, BodyPreview{}, BackupResult{}}

func loadSpec(t *testing.T) map[string]any {
	t.Helper()
	src, err := os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseYAML(string(src))
	if err != nil {
		t.Fatalf("%s: %v", openapiFile, err)
	}
	return doc.(map[string]any)
}

func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range asSlice(v) {
		out = append(out, x.(string))
	}
	sort.Strings(out)
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

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

// TestOpenAPISchemasMatchWireTypes: every wire type has the schema of its
// name, with exactly its JSON fields, required exactly when the field has
// no omitempty, of the JSON type its Go type encodes to, nullable exactly
// when null is sent or accepted, and no other property allowed.
func TestOpenAPISchemasMatchWireTypes(t *testing.T) {
	schemas := get(loadSpec(t), "components", "schemas").(map[string]any)
	checked := map[string]bool{}
	for _, list := range []struct {
		types   []any
		request bool
	}{{requests, true}, {responses, false}} {
		for _, v := range list.types {
			typ := reflect.TypeOf(v)
			name := typ.Name()
			checked[name] = true
			s, ok := schemas[name].(map[string]any)
			if !ok {
				t.Errorf("schema %s is missing", name)
				continue
			}
			if s["type"] != "object" || s["additionalProperties"] != "false" {
				t.Errorf("schema %s: want type: object and additionalProperties: false", name)
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
					t.Errorf("schema %s lacks property %s", name, fname)
					continue
				}
				nullable := f.typ.Kind() == reflect.Pointer && !f.omitempty || list.request && f.omitempty
				checkType(t, name+"."+fname, p, f.typ, nullable)
			}
			for pname := range props {
				if _, ok := fields[pname]; !ok {
					t.Errorf("schema %s has property %s, which %s lacks", name, pname, name)
				}
			}
			sort.Strings(required)
			if got := strs(s["required"]); !slices.Equal(got, required) {
				t.Errorf("schema %s: required %v; the type requires %v", name, got, required)
			}
		}
	}
	for name := range schemas {
		if !checked[name] {
			t.Errorf("schema %s has no wire type", name)
		}
	}
}

// checkType compares one property with the Go type of its field.
func checkType(t *testing.T, where string, p map[string]any, typ reflect.Type, nullable bool) {
	t.Helper()
	if got := p["nullable"] == "true"; got != nullable {
		t.Errorf("%s: nullable is %v, want %v", where, got, nullable)
	}
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() == reflect.Struct {
		if ref := "#/components/schemas/" + typ.Name(); p["$ref"] != ref {
			t.Errorf("%s: want $ref %s, got %v", where, ref, p["$ref"])
		}
		return
	}
	want := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer",
		reflect.Int64: "integer", reflect.Uint64: "integer", reflect.Float64: "number", reflect.Slice: "array",
		reflect.Map: "object"}[typ.Kind()]
	if p["type"] != want {
		t.Errorf("%s: type %v, want %s (Go %s)", where, p["type"], want, typ)
	}
	if (typ.Kind() == reflect.Int64 || typ.Kind() == reflect.Uint64) && p["format"] != "int64" {
		t.Errorf("%s: a 64-bit integer wants format: int64", where)
	}
	switch typ.Kind() {
	case reflect.Slice:
		items, _ := p["items"].(map[string]any)
		checkType(t, where+"[]", items, typ.Elem(), false)
	case reflect.Map:
		add, _ := p["additionalProperties"].(map[string]any)
		checkType(t, where+"{}", add, typ.Elem(), false)
	}
}

// TestOpenAPIEnums: the enums of the document are the API's.
func TestOpenAPIEnums(t *testing.T) {
	schemas := get(loadSpec(t), "components", "schemas")
	var codes, states []string
	for _, c := range Codes() {
		codes = append(codes, string(c))
	}
	for _, s := range States() {
		states = append(states, string(s))
	}
	sort.Strings(codes)
	sort.Strings(states)
	if got := strs(get(schemas, "ErrorBody", "properties", "code", "enum")); !slices.Equal(got, codes) {
		t.Errorf("ErrorBody.code enum %v, want %v", got, codes)
	}
	if got := strs(get(schemas, "MessageInfo", "properties", "state", "enum")); !slices.Equal(got, states) {
		t.Errorf("MessageInfo.state enum %v, want %v", got, states)
	}
	// A nullable request field lists null among its values (OpenAPI 3.0.3).
	encodings := []string{"null"}
	for _, e := range BodyEncodings() {
		encodings = append(encodings, string(e))
	}
	sort.Strings(encodings)
	if got := strs(get(schemas, "ReceiveRequest", "properties", "body_encoding", "enum")); !slices.Equal(got, encodings) {
		t.Errorf("ReceiveRequest.body_encoding enum %v, want %v", got, encodings)
	}
}

// TestOpenAPILimits: the numeric limits of the document are the engine's
// and the message package's (at their defaults where configurable).
func TestOpenAPILimits(t *testing.T) {
	doc := loadSpec(t)
	schemas := get(doc, "components", "schemas")
	opts := engine.NewOptions("")
	for _, c := range []struct {
		path []string
		want int
	}{
		{[]string{"ReceiveRequest", "properties", "max", "maximum"}, engine.MaxReceive},
		{[]string{"RedriveRequest", "properties", "max", "maximum"}, engine.MaxReceive},
		{[]string{"AckRequest", "properties", "receipts", "maxItems"}, engine.MaxReceive},
		{[]string{"ReceiveRequest", "properties", "ack", "maxItems"}, engine.MaxReceive},
		{[]string{"BatchRequest", "properties", "messages", "maxItems"}, opts.MaxBatch},
		{[]string{"TopicConfig", "properties", "queues", "maximum"}, opts.MaxQueues},
		{[]string{"SendMessage", "properties", "level", "maximum"}, len(opts.Limits.DelayLevels)},
		{[]string{"SendMessage", "properties", "properties", "maxProperties"}, opts.Limits.MaxProperties},
		{[]string{"SendMessage", "properties", "key", "maxLength"}, opts.Limits.MaxHeaderBytes},
		{[]string{"SendMessage", "properties", "body", "maxLength"}, opts.Limits.MaxBodyBytes},
	} {
		if got := get(schemas, c.path...); got != strconv.Itoa(c.want) {
			t.Errorf("%s is %v, want %d", strings.Join(c.path, "."), got, c.want)
		}
	}
	for _, name := range []string{"topic", "group"} {
		p := get(doc, "components", "parameters", name, "schema")
		if get(p, "maxLength") != strconv.Itoa(message.MaxTopicLen) || get(p, "minLength") != "1" {
			t.Errorf("parameter %s: length is not 1 to %d", name, message.MaxTopicLen)
		}
	}
}
