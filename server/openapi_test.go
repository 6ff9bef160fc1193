package server

import (
	"bufio"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The OpenAPI document is YAML and the standard library has no YAML
// parser, so this test reads the two parts it checks with a line-based
// reader that relies on the document's two-space indentation:
//
//   - the operations: every method+path the server routes is documented,
//     and every documented operation is routed;
//   - the schemas: each documented object schema has exactly the JSON
//     property names of the Go type the server encodes or decodes.
//
// It does not check types, descriptions or response codes.

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

// readOpenAPI returns the documented operations ("METHOD /path") and the
// property names of every schema under components/schemas.
func readOpenAPI(t *testing.T) (ops []string, schemas map[string][]string) {
	t.Helper()
	f, err := os.Open(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	schemas = map[string][]string{}
	var section, path, schema string
	inComponents, inProps := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if k, ok := yamlKey(line, 0); ok {
			section, inComponents = k, k == "components"
			continue
		}
		switch {
		case section == "paths":
			if k, ok := yamlKey(line, 2); ok {
				path = k
			} else if k, ok := yamlKey(line, 4); ok {
				switch k {
				case "get", "put", "post", "delete", "patch", "head":
					ops = append(ops, strings.ToUpper(k)+" "+path)
				}
			}
		case inComponents:
			if k, ok := yamlKey(line, 2); ok {
				section = "components." + k
				continue
			}
			if section != "components.schemas" {
				continue
			}
			if k, ok := yamlKey(line, 4); ok {
				schema, inProps = k, false
				schemas[schema] = []string{}
			} else if k, ok := yamlKey(line, 6); ok {
				inProps = k == "properties"
			} else if k, ok := yamlKey(line, 8); ok && inProps {
				schemas[schema] = append(schemas[schema], k)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ops, schemas
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	ops, _ := readOpenAPI(t)
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

func TestOpenAPISchemasMatchWireTypes(t *testing.T) {
	_, schemas := readOpenAPI(t)
	types := map[string]any{
		"SendMessage": sendJSON{}, "BatchRequest": batchJSON{}, "Receipt": receiptJSON{}, "BatchReceipts": batchReceiptsJSON{},
		"MessageInfo": infoJSON{}, "Cancelled": cancelledJSON{}, "RescheduleRequest": rescheduleJSON{}, "Rescheduled": rescheduledJSON{},
		"TopicConfig": topicConfigJSON{}, "Topic": topicJSON{}, "TopicList": topicsJSON{},
		"GroupConfig": groupConfigJSON{}, "Group": groupJSON{}, "GroupList": groupsJSON{},
		"ReceiveRequest": receiveJSON{}, "ReceivedMessage": receivedJSON{}, "ReceiveResponse": messagesJSON{},
		"AckRequest": ackJSON{}, "AckResponse": ackedJSON{}, "NackRequest": nackJSON{}, "InvisibilityRequest": invisibilityJSON{},
		"RedriveRequest": redriveJSON{}, "RedriveResponse": redrivenJSON{}, "Stats": statsJSON{},
		"Error": errorJSON{}, "ErrorBody": errorBodyJSON{}, "Empty": struct{}{},
		"Health": struct {
			Status string `json:"status"`
		}{},
	}
	for name, v := range types {
		props, ok := schemas[name]
		if !ok {
			t.Errorf("schema %s is missing from %s", name, openapiFile)
			continue
		}
		want := []string{}
		for name := range wireFields(reflect.TypeOf(v)) {
			want = append(want, name)
		}
		sort.Strings(props)
		sort.Strings(want)
		if !reflect.DeepEqual(props, want) && !(len(props) == 0 && len(want) == 0) {
			t.Errorf("schema %s has properties %v; the server uses %v", name, props, want)
		}
	}
	for name := range schemas {
		if _, ok := types[name]; !ok {
			t.Errorf("schema %s is documented but no wire type is checked against it", name)
		}
	}
}
