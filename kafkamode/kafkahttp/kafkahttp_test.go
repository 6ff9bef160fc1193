package kafkahttp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/forecast"
	"github.com/hourglass-mq/hourglass/kafkamode"
)

// stubForecaster answers forecasts with fixed counts, or err.
type stubForecaster struct {
	err  error
	plan forecast.Plan
}

func (s *stubForecaster) Forecast(_ context.Context, p forecast.Plan) (kafkamode.IndexForecast, error) {
	s.plan = p
	if s.err != nil {
		return kafkamode.IndexForecast{}, s.err
	}
	out := kafkamode.IndexForecast{Partitions: []int32{0, 2}, Pending: 9}
	for i := range p.N {
		a := (p.From + int64(i)*p.Step) * 1000
		out.Buckets = append(out.Buckets, forecast.Bucket{Start: a, End: a + p.Step*1000, Count: int64(i + 1)})
	}
	return out, nil
}

// newTestHandler is a handler whose Kafka is unreachable: every request
// these tests make must be answered before it would reach Kafka.
func newTestHandler(t *testing.T, token string, fc Forecaster) *Handler {
	t.Helper()
	cfg := kafkamode.DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.DLQTopic, cfg.StateTopic = cfg.DelayTopic+".dlq", cfg.DelayTopic+".state"
	h, err := New(cfg, fc, Options{AuthToken: token, Now: func() time.Time { return time.UnixMilli(1_800_000_000_000) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func do(t *testing.T, h http.Handler, method, path, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %q", method, path, rec.Body.String())
	}
	return rec.Code, out
}

// errorOf returns the code and message of an error answer, failing when
// the answer is not in the API's error shape.
func errorOf(t *testing.T, out map[string]any) (string, string) {
	t.Helper()
	e, ok := out["error"].(map[string]any)
	if !ok {
		t.Fatalf("answer %v is not {\"error\": {...}}", out)
	}
	return e["code"].(string), e["message"].(string)
}

// TestValidation: every malformed request is refused with 400 (or 413)
// in the API's error shape, with a message naming the problem, before
// anything is produced (the handler's Kafka does not exist).
func TestValidation(t *testing.T) {
	h := newTestHandler(t, "", &stubForecaster{})
	send := "/v1/topics/orders/messages"
	for _, c := range []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"PUT", "/v1/messages/k:0:1", ``, 405, "allowed: GET, DELETE"},
		{"POST", send, `{"body":"x","colour":"red"}`, 400, `unknown field "colour"`},
		{"POST", send, `null`, 400, "JSON object"},
		{"POST", send, ``, 400, "JSON object"},
		{"POST", send, `{"body":"x"} {}`, 400, "after the JSON object"},
		{"POST", send, `{"body":5}`, 400, "not valid"},
		{"POST", send, `{"body":"x","body_base64":"eA=="}`, 400, "not both"},
		{"POST", send, `{"body_base64":"%%%"}`, 400, "base64"},
		{"POST", send, `{"body":"x","tag":"t"}`, 400, `"tag" is not supported`},
		{"POST", send, `{"body":"x","group":"g"}`, 400, `"group" is not supported`},
		{"POST", send, `{"body":"x","dedup_id":"d"}`, 400, `"dedup_id" is not supported`},
		{"POST", send, `{"body":"x","ttl":"1h"}`, 400, `"ttl" is not supported`},
		{"POST", send, `{"body":"x","deadline":1}`, 400, `"deadline" is not supported`},
		{"POST", send, `{"body":"x","window":5}`, 400, `"window" is not supported`},
		{"POST", send, `{"body":"x","level":3}`, 400, `"level" is not supported`},
		{"POST", send, `{"body":"x","delay":"soon"}`, 400, "not a duration"},
		{"POST", send, `{"body":"x","delay":"-1s"}`, 400, "out of range"},
		{"POST", send, `{"body":"x","delay":"1s","at":1900000000000}`, 400, "not both"},
		{"POST", send, `{"body":"x","at":-5}`, 400, "before the Unix epoch"},
		{"POST", send, `{"body":"x","at":99999999999999999}`, 400, "100 years"},
		{"POST", send, `{"body":"x","properties":{"_bizTopic":"other"}}`, 400, "reserved"},
		{"POST", send, `{"body":"x","properties":{"hourglass-due-ms":"1"}}`, 400, "reserved"},
		// The worker drops such headers whatever their case: a property
		// so named would vanish.
		{"POST", send, `{"body":"x","properties":{"Hourglass-Trace":"1"}}`, 400, "reserved"},
		{"POST", send, `{"body":"x","properties":{"HOURGLA\u017fS-source":"1"}}`, 400, "reserved"},
		{"POST", send, `{"body":"x","properties":{"":"v"}}`, 400, "empty"},
		{"POST", send, `{"body":"x","properties":{"a":null}}`, 400, "null"},
		{"POST", "/v1/topics/bad%20topic/messages", `{"body":"x"}`, 400, "character"},
		{"POST", "/v1/topics/hourglass.delay/messages", `{"body":"x"}`, 400, "worker's own topics"},
		{"POST", "/v1/topics/hourglass.delay.dlq/messages", `{"body":"x"}`, 400, "worker's own topics"},
		{"POST", send + "?x=1", `{"body":"x"}`, 400, "takes no query parameters"},
		{"POST", send, `{"body":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "exceeds the limit"},
		{"GET", "/v1/messages/42", ``, 400, "k:<partition>:<offset>"},
		{"GET", "/v1/messages/k:1", ``, 400, "k:<partition>:<offset>"},
		{"GET", "/v1/messages/k:01:5", ``, 400, "leading zeros"},
		{"GET", "/v1/messages/k:1:-5", ``, 400, "decimal"},
		{"GET", "/v1/messages/k:4294967296:5", ``, 400, "out of range"},
		{"GET", "/v1/messages/k:1:5?full=1", ``, 400, "accepted: GET /v1/messages/{id} takes no query parameters"},
		{"DELETE", "/v1/messages/abc", ``, 400, "k:<partition>:<offset>"},
		{"POST", "/v1/messages/k:0:1/reschedule", `{}`, 400, "give the new time"},
		{"POST", "/v1/messages/k:0:1/reschedule", `{"level":2}`, 400, `"level" is not supported`},
		{"POST", "/v1/messages/k:0:1/reschedule", `{"delay":"1s","when":3}`, 400, `unknown field "when"`},
		{"POST", "/v1/messages/x/reschedule", `{"delay":"1s"}`, 400, "k:<partition>:<offset>"},
		{"DELETE", "/v1/keys/order-1?all=1", ``, 400, "no query parameters"},
		{"GET", "/v1/topics/orders/keys/k?x=1", ``, 400, "no query parameters"},
		{"GET", "/v1/forecast?topic=orders", ``, 400, `"topic" is not supported`},
		{"GET", "/v1/forecast?colour=red", ``, 400, `"colour" is not accepted`},
		{"GET", "/v1/forecast?from=-1", ``, 400, "Unix milliseconds"},
		{"GET", "/v1/forecast?from=9223372036854775807", ``, 400, "an integer from 0 to"},
		{"GET", "/v1/forecast?from=5&from=6", ``, 400, "given 2 times"},
		{"GET", "/v1/forecast?step=1ms", ``, 400, "step"},
		{"GET", "/v1/forecast?from=100000&to=5", ``, 400, "before to"},
		{"GET", "/v1/forecast?from=0&to=100000000&step=1s", ``, 400, "limit"},
		{"GET", "/v1/topics", ``, 404, "no such endpoint in Kafka mode"},
		{"POST", "/v1/topics/orders/batch", `{}`, 404, "no such endpoint in Kafka mode"},
	} {
		status, out := do(t, h, c.method, c.path, c.body)
		code, msg := errorOf(t, out)
		if status != c.status || api.Status(errs.Code(code)) != status && status != 405 || !strings.Contains(msg, c.msg) {
			t.Errorf("%s %s %.60s: %d %s %q; want %d with %q", c.method, c.path, c.body, status, code, msg, c.status, c.msg)
		}
	}
}

// TestAuth: with a token, requests without it (or with another) are
// refused with 401 and WWW-Authenticate; /healthz stays open.
func TestAuth(t *testing.T) {
	h := newTestHandler(t, "s3cret", &stubForecaster{})
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}} {
		status, out := do(t, h, "GET", "/v1/forecast", "", hdr...)
		if code, _ := errorOf(t, out); status != 401 || code != string(errs.Unauthenticated) {
			t.Errorf("headers %v: %d %s, want 401 unauthenticated", hdr, status, code)
		}
	}
	if status, out := do(t, h, "GET", "/v1/forecast", "", "Authorization", "bearer s3cret"); status != 200 {
		t.Errorf("with the token: %d %v", status, out)
	}
	if status, out := do(t, h, "GET", "/healthz", ""); status != 200 || out["status"] != "ok" {
		t.Errorf("healthz: %d %v", status, out)
	}
}

// TestForecast: the forecast has the embedded API's shape and defaults
// (from now for an hour, by the minute), plus the worker's partitions; a
// worker that cannot answer is 503.
func TestForecast(t *testing.T) {
	fc := &stubForecaster{}
	h := newTestHandler(t, "", fc)
	status, out := do(t, h, "GET", "/v1/forecast", "")
	if status != 200 {
		t.Fatalf("%d %v", status, out)
	}
	raw, _ := json.Marshal(out)
	var f api.KafkaForecast
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if f.StepSeconds != 60 || len(f.Buckets) != 60 || f.From != 1_800_000_000_000 || f.To != 1_800_003_600_000 {
		t.Fatalf("step %d, %d buckets, [%d, %d): want the default hour by the minute from now", f.StepSeconds, len(f.Buckets), f.From, f.To)
	}
	if f.Total != 60*61/2 || f.Buckets[2].Count != 3 || f.Buckets[2].StartTime == "" || f.Pending != 9 || len(f.Partitions) != 2 {
		t.Fatalf("total %d, bucket %+v, pending %d, partitions %v", f.Total, f.Buckets[2], f.Pending, f.Partitions)
	}
	if status, out := do(t, h, "GET", "/v1/forecast?from=1800000000000&to=1800000010000&step=second", ""); status != 200 || len(out["buckets"].([]any)) != 10 {
		t.Fatalf("10 s by the second: %d %v", status, out)
	}
	fc.err = kafkamode.ErrNotServing
	status, out = do(t, h, "GET", "/v1/forecast", "")
	if code, msg := errorOf(t, out); status != 503 || code != string(errs.Unavailable) || !strings.Contains(msg, "not serving") {
		t.Fatalf("a worker between sessions: %d %s %q, want 503", status, code, msg)
	}
}

// TestID: IDs round-trip, and only the canonical form parses.
func TestID(t *testing.T) {
	for _, c := range []struct {
		p int32
		o int64
	}{{0, 0}, {7, 123456789012}, {2147483647, 9223372036854775807}} {
		p, o, err := ParseID(FormatID(c.p, c.o))
		if err != nil || p != c.p || o != c.o {
			t.Errorf("%d/%d: got %d/%d %v", c.p, c.o, p, o, err)
		}
	}
	for _, bad := range []string{"", "k:", "k::", "k:1:", "k::1", "x:1:2", "k:1:2:3", "k:+1:2", "k: 1:2", "K:1:2", "k:1:00"} {
		if _, _, err := ParseID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
