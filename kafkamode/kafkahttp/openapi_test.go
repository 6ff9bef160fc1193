package kafkahttp

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/internal/openapispec"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// openapiFile documents this package's API; these tests hold it to the
// code as package api's tests hold docs/openapi.yaml (see openapispec).
const openapiFile = "../../docs/openapi-kafka.yaml"

// requests are the types the handler decodes (refusing unknown fields);
// responses the types it encodes. The document has a schema for each and
// for nothing else.
var (
	requests  = []any{api.SendMessage{}, api.RescheduleRequest{}}
	responses = []any{api.Receipt{}, api.KafkaMessageInfo{}, api.KafkaCancel{}, api.Rescheduled{},
		api.KafkaForecast{}, api.ForecastBucket{}, api.Health{}, api.Error{}, api.ErrorBody{}}
)

func loadSpec(t *testing.T) map[string]any { return openapispec.LoadOrFail(t, openapiFile) }

// TestOpenAPIDocumentsEveryRoute: the document's operations are exactly
// the routes the handler registers, and each names the parameters of its
// path.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := loadSpec(t)
	documented := openapispec.Operations(doc)
	var routed []string
	for _, rt := range newTestHandler(t, "", &stubForecaster{}).routes() {
		routed = append(routed, rt.pattern)
	}
	sort.Strings(routed)
	if !slices.Equal(documented, routed) {
		t.Errorf("%s documents\n  %v\nthe handler routes\n  %v", openapiFile, documented, routed)
	}
	if len(routed) < 9 {
		t.Fatalf("only %d routes", len(routed))
	}
	param := regexp.MustCompile(`\{([a-z]+)\}`)
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		var named []string
		params, _ := openapispec.Get(doc, "paths", path, strings.ToLower(method), "parameters").([]any)
		for _, p := range params {
			if ref, ok := openapispec.Get(p, "$ref").(string); ok {
				p = openapispec.Get(doc, "components", "parameters", strings.TrimPrefix(ref, "#/components/parameters/"))
			}
			if openapispec.Get(p, "in") == "path" {
				named = append(named, openapispec.Get(p, "name").(string))
			}
		}
		var want []string
		for _, m := range param.FindAllStringSubmatch(path, -1) {
			want = append(want, m[1])
		}
		sort.Strings(named)
		sort.Strings(want)
		if !slices.Equal(named, want) {
			t.Errorf("%s: path parameters %v documented, the path has %v", op, named, want)
		}
	}
}

// TestOpenAPISchemasMatchWireTypes: every wire type the handler decodes or
// encodes has the schema of its name by openapispec's rules, and every
// schema is one of them.
func TestOpenAPISchemasMatchWireTypes(t *testing.T) {
	schemas := openapispec.Get(loadSpec(t), "components", "schemas").(map[string]any)
	for _, p := range openapispec.DocumentProblems(schemas, requests, responses) {
		t.Error(p)
	}
}

// TestOpenAPIEnums: the enums of the document are the API's.
func TestOpenAPIEnums(t *testing.T) {
	schemas := openapispec.Get(loadSpec(t), "components", "schemas")
	strs := func(xs ...string) []string { sort.Strings(xs); return xs }
	var codes, states []string
	for _, c := range api.Codes() {
		codes = append(codes, string(c))
	}
	for _, s := range api.KafkaStates() {
		states = append(states, string(s))
	}
	for _, c := range []struct {
		path []string
		want []string
	}{
		{[]string{"ErrorBody", "properties", "code", "enum"}, strs(codes...)},
		{[]string{"KafkaMessageInfo", "properties", "state", "enum"}, strs(states...)},
		{[]string{"KafkaCancel", "properties", "state", "enum"}, strs(string(api.StateCancelled), string(api.StateCancelRequested))},
		{[]string{"Health", "properties", "clock", "enum"}, []string{api.ClockSystem}},
	} {
		if got := openapispec.Strs(openapispec.Get(schemas, c.path...)); !slices.Equal(got, c.want) {
			t.Errorf("%s is %v, want %v", strings.Join(c.path, "."), got, c.want)
		}
	}
}

// TestOpenAPIPatterns: the documented patterns of a message ID and a topic
// accept what ParseID and the handler accept (an ID up to the pattern's 9
// and 18 digits), and every ID FormatID writes matches.
func TestOpenAPIPatterns(t *testing.T) {
	doc := loadSpec(t)
	idPattern := openapispec.Get(doc, "components", "parameters", "id", "schema", "pattern").(string)
	id := regexp.MustCompile(idPattern)
	for _, schema := range []string{"Receipt", "KafkaMessageInfo", "Rescheduled"} {
		if p := openapispec.Get(doc, "components", "schemas", schema, "properties", "id", "pattern"); p != idPattern {
			t.Errorf("%s.id pattern %v, want the id parameter's %s", schema, p, idPattern)
		}
	}
	for _, s := range []string{"k:0:0", "k:7:123", "k:999999999:999999999999999999", "k:00:1", "k:1:01", "k:-1:2",
		"k:1", "k:1:2:3", "x:1:2", "k::1", "K:1:2", "k: 1:2", "k:1:+2", "k:1:2 ", "k:2147483648:1", ""} {
		_, _, err := ParseID(s)
		if got := id.MatchString(s); got != (err == nil) {
			t.Errorf("ID %q: pattern matches %v, ParseID error %v", s, got, err)
		}
	}
	// Beyond the pattern's digits, the server still reads numbers within
	// 32 and 64 bits (the document says so).
	for _, s := range []string{"k:2147483647:1", "k:1:9223372036854775807"} {
		if _, _, err := ParseID(s); id.MatchString(s) || err != nil {
			t.Errorf("ID %q: want the pattern to refuse it and ParseID to read it (error %v)", s, err)
		}
	}
	if s := FormatID(12, 3456); !id.MatchString(s) {
		t.Errorf("FormatID wrote %q, which the pattern refuses", s)
	}
	// Go's regexp has no lookahead: the pattern's refusal of "." and ".."
	// is checked by name.
	topicPattern := openapispec.Get(doc, "components", "parameters", "topic", "schema", "pattern").(string)
	lookahead := `(?!\.{1,2}$)`
	if !strings.Contains(topicPattern, lookahead) {
		t.Fatalf("topic pattern %s lacks %s", topicPattern, lookahead)
	}
	topic := regexp.MustCompile(strings.Replace(topicPattern, lookahead, "", 1))
	for _, s := range []string{"orders", "a.b_c-D9", strings.Repeat("x", 249), strings.Repeat("x", 250), "", ".", "..",
		"...", "a b", "a/b", "a%41", "é"} {
		err := kafkamode.CheckTopic(s)
		if got := topic.MatchString(s) && s != "." && s != ".."; got != (err == nil) {
			t.Errorf("topic %q: pattern matches %v, CheckTopic error %v", s, got, err)
		}
	}
}
