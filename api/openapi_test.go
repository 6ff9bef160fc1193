package api

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/internal/openapispec"
	"github.com/hourglass-mq/hourglass/message"
)

const openapiFile = "../docs/openapi.yaml"

// requests are the types the server decodes: it refuses unknown fields,
// and takes null for an optional field as "not given" (so the document
// marks every optional request field nullable).
var requests = []any{SendMessage{}, BatchRequest{}, RescheduleRequest{}, TopicConfig{}, GroupConfig{},
	ReceiveRequest{}, AckRequest{}, StreamAck{}, NackRequest{}, InvisibilityRequest{}, RedriveRequest{},
	BackupRequest{}, DeadSelection{}, SeekRequest{}}

// responses are the types the server encodes.
var responses = []any{Receipt{}, BatchReceipts{}, MessageInfo{}, Cancelled{}, Rescheduled{}, Topic{}, TopicList{},
	Group{}, GroupList{}, ReceivedMessage{}, ReceiveResponse{}, AckResponse{}, RedriveResponse{}, Empty{}, Health{},
	Stats{}, Error{}, ErrorBody{}, Forecast{}, ForecastBucket{}, BodyPreview{}, BackupResult{},
	Damage{}, DamagedRange{}, SetAside{}, Scrub{}, Whoami{}, SendStreamAnswer{}, MessagePage{}, ListedMessage{}, DeadLetterResult{}, Trail{}, TrailEvent{}, SeekResult{}, SeekQueue{}, ScheduleFiring{}, ScheduleFirings{}}

func loadSpec(t *testing.T) map[string]any { return openapispec.LoadOrFail(t, openapiFile) }

var (
	get  = openapispec.Get
	strs = openapispec.Strs
)

// TestOpenAPISchemasMatchWireTypes: every wire type has the schema of its
// name, with exactly its JSON fields, required exactly when the field has
// no omitempty, of the JSON type its Go type encodes to, nullable exactly
// when null is sent or accepted, and no other property allowed.
func TestOpenAPISchemasMatchWireTypes(t *testing.T) {
	schemas := get(loadSpec(t), "components", "schemas").(map[string]any)
	for _, p := range openapispec.DocumentProblems(schemas, requests, responses) {
		t.Error(p)
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
	kinds := slices.Sorted(slices.Values(engine.EventKinds()))
	if got := slices.Sorted(slices.Values(strs(get(schemas, "TrailEvent", "properties", "kind", "enum")))); !slices.Equal(got, kinds) {
		t.Errorf("TrailEvent.kind enum %v, want %v", got, kinds)
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
		{[]string{"DeadSelection", "properties", "ids", "maxItems"}, engine.MaxDeadSelection},
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

// TestListingLimits: the listings' limits of the wire are the engine's.
func TestListingLimits(t *testing.T) {
	doc := loadSpec(t)
	if MaxDeadSelection != engine.MaxDeadSelection || MaxListLimit != engine.MaxListLimit || DefaultListLimit != engine.DefaultListLimit ||
		MaxListFilter != engine.MaxListFilter {
		t.Errorf("api limits %d, %d, %d; engine %d, %d, %d", MaxDeadSelection, MaxListLimit, DefaultListLimit,
			engine.MaxDeadSelection, engine.MaxListLimit, engine.DefaultListLimit)
	}
	if got := get(doc, "components", "parameters", "listLimit", "schema", "maximum"); got != strconv.Itoa(engine.MaxListLimit) {
		t.Errorf("listLimit maximum %v, want %d", got, engine.MaxListLimit)
	}
	for _, p := range []string{"keyPrefix", "tag"} {
		if got := get(doc, "components", "parameters", p, "schema", "maxLength"); got != strconv.Itoa(engine.MaxListFilter) {
			t.Errorf("%s maxLength %v, want %d", p, got, engine.MaxListFilter)
		}
	}
}
