package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// now is the fixed wall clock of the tests: relative times print exactly.
var now = time.UnixMilli(1_900_000_000_000)

// result is what one command run produced.
type result struct {
	code           int
	stdout, stderr string
}

// runner runs commands in-process with a fixed clock and environment.
type runner struct {
	t   *testing.T
	env map[string]string
	ctx context.Context
}

func newRunner(t *testing.T, env map[string]string) *runner {
	return &runner{t: t, env: env, ctx: context.Background()}
}

func (r *runner) runIn(stdin string, args ...string) result {
	r.t.Helper()
	var out, errb bytes.Buffer
	a := &App{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Now: func() time.Time { return now },
		LookupEnv: func(k string) (string, bool) { v, ok := r.env[k]; return v, ok }}
	code := a.Run(r.ctx, args)
	return result{code, out.String(), errb.String()}
}

func (r *runner) run(args ...string) result { r.t.Helper(); return r.runIn("", args...) }

// fakeServer answers each request by method and path with a canned
// response and records the requests.
type fakeServer struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []fakeRequest
	routes map[string]fakeResponse
	onReq  func(n int) // called after each request with the count so far
}

type fakeRequest struct {
	Method, Path, Auth string
	Body               map[string]any
}

type fakeResponse struct {
	status int
	body   string
}

func newFakeServer(t *testing.T, routes map[string]fakeResponse) *fakeServer {
	f := &fakeServer{t: t, routes: routes}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		req := fakeRequest{Method: r.Method, Path: r.URL.EscapedPath(), Auth: r.Header.Get("Authorization")}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &req.Body); err != nil {
				t.Errorf("request body is not JSON: %q", raw)
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		n := len(f.reqs)
		resp, ok := f.routes[r.Method+" "+req.Path]
		f.mu.Unlock()
		if !ok {
			resp = fakeResponse{404, `{"error":{"code":"not_found","message":"no route ` + r.Method + " " + req.Path + `"}}`}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.status)
		io.WriteString(w, resp.body)
		if f.onReq != nil {
			f.onReq(n)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.reqs...)
}

func (f *fakeServer) env() map[string]string { return map[string]string{"HOURGLASS_SERVER": f.srv.URL} }

func okJSON(body string) fakeResponse { return fakeResponse{200, body} }

func (res result) wantCode(t *testing.T, code int) {
	t.Helper()
	if res.code != code {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", res.code, code, res.stdout, res.stderr)
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	r := newRunner(t, nil)
	res := r.run("help")
	res.wantCode(t, ExitOK)
	for _, c := range commands() {
		if !strings.Contains(res.stdout, "  "+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, res.stdout)
		}
	}
	if res := r.run(); res.code != ExitUsage || !strings.Contains(res.stderr, "usage: hourglass <command>") {
		t.Errorf("no arguments: %+v", res)
	}
	if res := r.run("frobnicate"); res.code != ExitUsage || !strings.Contains(res.stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %+v", res)
	}
}

func TestCommandHelpExplainsFlags(t *testing.T) {
	r := newRunner(t, nil)
	for _, c := range commands() {
		res := r.run(c.name, "--help")
		res.wantCode(t, ExitOK)
		if !strings.Contains(res.stderr, "usage: hourglass "+c.name) {
			t.Errorf("%s --help: no usage line:\n%s", c.name, res.stderr)
		}
		if c.help != "" && !strings.Contains(res.stderr, strings.Fields(c.help)[0]) {
			t.Errorf("%s --help does not show the help text", c.name)
		}
	}
	res := r.run("help", "send")
	res.wantCode(t, ExitOK)
	for _, flag := range []string{"-delay", "-at", "-level", "-key", "-tag", "-group", "-prop", "-topic", "-server", "-token", "-json"} {
		if !strings.Contains(res.stdout, flag) {
			t.Errorf("help send does not explain %s:\n%s", flag, res.stdout)
		}
	}
	res = r.run("help", "serve")
	for _, flag := range []string{"-data-dir", "-listen", "-flush", "-config"} {
		if !strings.Contains(res.stdout, flag) {
			t.Errorf("help serve does not explain %s", flag)
		}
	}
}

func TestHelpNeverPrintsTheToken(t *testing.T) {
	r := newRunner(t, map[string]string{"HOURGLASS_TOKEN": "very-secret"})
	res := r.run("send", "--help")
	if strings.Contains(res.stderr, "very-secret") {
		t.Errorf("--help printed the token from the environment:\n%s", res.stderr)
	}
}

func TestParseFlagsInterleavedAndDoubleDash(t *testing.T) {
	cases := []struct {
		args  []string
		pos   []string
		topic string
	}{
		{[]string{"--topic", "t", "body"}, []string{"body"}, "t"},
		{[]string{"body", "--topic", "t"}, []string{"body"}, "t"},
		{[]string{"a", "--topic", "t", "b"}, []string{"a", "b"}, "t"},
		{[]string{"--topic", "t", "--", "--not-a-flag", "x"}, []string{"--not-a-flag", "x"}, "t"},
		{[]string{"a", "--", "--topic", "u"}, []string{"a", "--topic", "u"}, ""},
		{[]string{"--topic", "t"}, nil, "t"},
	}
	for _, tc := range cases {
		a := &App{Stderr: io.Discard}
		fs := a.newFlagSet(&command{name: "x"})
		topic := fs.String("topic", "", "")
		pos, _, ok := parseFlags(fs, tc.args)
		if !ok || !reflect.DeepEqual(pos, tc.pos) || *topic != tc.topic {
			t.Errorf("parse %q: pos %q topic %q ok %v, want pos %q topic %q", tc.args, pos, *topic, ok, tc.pos, tc.topic)
		}
	}
	a := &App{Stderr: io.Discard}
	fs := a.newFlagSet(&command{name: "x"})
	if _, code, ok := parseFlags(fs, []string{"--nope"}); ok || code != ExitUsage {
		t.Errorf("unknown flag: ok %v code %d", ok, code)
	}
	if _, code, ok := parseFlags(a.newFlagSet(&command{name: "x"}), []string{"-h"}); ok || code != ExitOK {
		t.Errorf("-h: ok %v code %d", ok, code)
	}
}

func TestSend(t *testing.T) {
	due := now.Add(10 * time.Second).UnixMilli()
	f := newFakeServer(t, map[string]fakeResponse{
		"POST /v1/topics/orders/messages": okJSON(`{"id":"000a","topic":"orders","queue":2,"due":` + itoa(due) + `,"due_time":"x"}`),
	})
	r := newRunner(t, f.env())
	res := r.run("send", "--topic", "orders", "--delay", "10s", "--key", "order-123", "--tag", "close", "--group", "g1",
		"--prop", "a=1", "--prop", "b=x=y", "close unpaid order 123")
	res.wantCode(t, ExitOK)
	want := "sent 000a to orders (queue 2), due 2030-03-17T17:46:50.000Z (in 10s)\n"
	if res.stdout != want {
		t.Errorf("stdout %q, want %q", res.stdout, want)
	}
	got := f.requests()[0].Body
	wantBody := map[string]any{"key": "order-123", "tag": "close", "group": "g1", "delay": "10s",
		"properties": map[string]any{"a": "1", "b": "x=y"}, "body": "close unpaid order 123"}
	if !reflect.DeepEqual(got, wantBody) {
		t.Errorf("request body\n got %v\nwant %v", got, wantBody)
	}

	// Body from stdin, --at as RFC 3339 and as Unix ms, --level.
	for _, tc := range []struct {
		args []string
		key  string
		val  any
	}{
		{[]string{"--at", "2030-03-17T17:46:50Z"}, "at", float64(due)},
		{[]string{"--at", itoa(due)}, "at", float64(due)},
		{[]string{"--level", "3"}, "level", float64(3)},
	} {
		res := r.runIn("from stdin\n", append([]string{"send", "--topic", "orders"}, tc.args...)...)
		res.wantCode(t, ExitOK)
		reqs := f.requests()
		body := reqs[len(reqs)-1].Body
		if body[tc.key] != tc.val || body["body"] != "from stdin\n" {
			t.Errorf("send %q: request body %v, want %s=%v and the stdin body", tc.args, body, tc.key, tc.val)
		}
	}

	// --json prints the receipt as the API returned it.
	res = r.run("send", "--json", "--topic", "orders", "x")
	res.wantCode(t, ExitOK)
	var receipt map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &receipt); err != nil || receipt["id"] != "000a" || receipt["due"] != float64(due) {
		t.Errorf("--json output %q (%v)", res.stdout, err)
	}
}

func TestSendUsageErrors(t *testing.T) {
	f := newFakeServer(t, nil)
	r := newRunner(t, f.env())
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"send", "body"}, "--topic is required"},
		{[]string{"send", "--topic", "t", "--delay", "1s", "--level", "2", "b"}, "at most one of --delay, --at and --level"},
		{[]string{"send", "--topic", "t", "--at", "tomorrow", "b"}, "neither RFC 3339"},
		{[]string{"send", "--topic", "t", "--delay", "-1s", "b"}, "negative"},
		{[]string{"send", "--topic", "t", "--prop", "novalue", "b"}, "want name=value"},
		{[]string{"send", "--topic", "t", "a", "b"}, "one argument"},
		{[]string{"send", "--topic", "t", "--delay", "soon", "b"}, "invalid value"},
	}
	for _, tc := range cases {
		res := r.run(tc.args...)
		if res.code != ExitUsage || !strings.Contains(res.stderr, tc.msg) {
			t.Errorf("%q: exit %d stderr %q, want %d and %q", tc.args, res.code, res.stderr, ExitUsage, tc.msg)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent for bad command lines", n)
	}
}

func TestServerErrorIsReportedWithCodeAndExit1(t *testing.T) {
	f := newFakeServer(t, map[string]fakeResponse{
		"GET /v1/topics/orders/keys/order-9": {404, `{"error":{"code":"not_found","message":"no message with key \"order-9\" in topic \"orders\""}}`},
	})
	res := newRunner(t, f.env()).run("inspect", "--topic", "orders", "--key", "order-9")
	res.wantCode(t, ExitFailed)
	want := "hourglass inspect: not_found (HTTP 404): no message with key \"order-9\" in topic \"orders\"\n"
	if res.stderr != want {
		t.Errorf("stderr %q, want %q", res.stderr, want)
	}
	if res.stdout != "" {
		t.Errorf("stdout %q on error", res.stdout)
	}
}

func TestServerAndTokenFromFlagsAndEnv(t *testing.T) {
	f := newFakeServer(t, map[string]fakeResponse{"GET /v1/stats": okJSON(`{}`)})
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": "http://127.0.0.1:1", "HOURGLASS_TOKEN": "from-env"})
	r.run("stats", "--server", f.srv.URL).wantCode(t, ExitOK)
	r.run("stats", "--server", f.srv.URL, "--token", "from-flag").wantCode(t, ExitOK)
	r.env["HOURGLASS_SERVER"] = f.srv.URL
	r.run("stats").wantCode(t, ExitOK)
	reqs := f.requests()
	if len(reqs) != 3 || reqs[0].Auth != "Bearer from-env" || reqs[1].Auth != "Bearer from-flag" || reqs[2].Auth != "Bearer from-env" {
		t.Errorf("requests %+v", reqs)
	}
}

func TestInspectCancelRescheduleByIDAndKey(t *testing.T) {
	due := now.Add(90 * time.Minute).UnixMilli()
	info := `{"id":"00ff","state":"pending","topic":"orders","queue":1,"key":"order-123","due":` + itoa(due) + `,"sent":` + itoa(now.Add(-2*time.Second).UnixMilli()) + `,"visible":0,"body_bytes":22}`
	f := newFakeServer(t, map[string]fakeResponse{
		"GET /v1/messages/00ff":                okJSON(info),
		"GET /v1/topics/orders/keys/order-123": okJSON(info),
		"DELETE /v1/messages/00ff":             okJSON(`{"id":"00ff","state":"cancelled"}`),
		"POST /v1/messages/00ff/reschedule":    okJSON(`{"id":"00ff","due":` + itoa(due) + `}`),
	})
	r := newRunner(t, f.env())

	res := r.run("inspect", "00ff")
	res.wantCode(t, ExitOK)
	for _, want := range []string{"id:           00ff", "state:        pending", "topic:        orders (queue 1)", "key:          order-123",
		"due:          2030-03-17T19:16:40.000Z (in 1h30m0s)", "sent:         2030-03-17T17:46:38.000Z (2s ago)", "body:         22 bytes"} {
		if !strings.Contains(squash(res.stdout), squash(want)) {
			t.Errorf("inspect output lacks %q:\n%s", want, res.stdout)
		}
	}

	r.run("cancel", "--topic", "orders", "--key", "order-123").wantCode(t, ExitOK)
	res = r.run("reschedule", "00ff", "--delay", "90m", "--if-due", "2030-03-17T17:46:40Z")
	res.wantCode(t, ExitOK)
	if want := "rescheduled 00ff, due 2030-03-17T19:16:40.000Z (in 1h30m0s)\n"; res.stdout != want {
		t.Errorf("reschedule stdout %q, want %q", res.stdout, want)
	}
	reqs := f.requests()
	var got []string
	for _, q := range reqs {
		got = append(got, q.Method+" "+q.Path)
	}
	want := []string{"GET /v1/messages/00ff", "GET /v1/topics/orders/keys/order-123", "DELETE /v1/messages/00ff", "POST /v1/messages/00ff/reschedule"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
	if b := reqs[3].Body; b["delay"] != "1h30m0s" || b["if_due"] != float64(now.UnixMilli()) {
		t.Errorf("reschedule body %v", b)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"inspect"}, "give a message ID, or --topic and --key"},
		{[]string{"inspect", "--key", "k"}, "--topic and --key go together"},
		{[]string{"cancel", "a", "b"}, "one message ID"},
		{[]string{"inspect", "00ff", "--topic", "t", "--key", "k"}, "not both"},
		{[]string{"reschedule", "00ff"}, "give the new time"},
		{[]string{"reschedule", "00ff", "--delay", "1s", "--if-due", "x"}, "--if-due"},
	} {
		res := r.run(tc.args...)
		if res.code != ExitUsage || !strings.Contains(res.stderr, tc.msg) {
			t.Errorf("%q: exit %d stderr %q, want usage error %q", tc.args, res.code, res.stderr, tc.msg)
		}
	}
}

func TestTopicsAndGroups(t *testing.T) {
	group := `{"topic":"orders","name":"billing","max_attempts":16,"backoff_base":"1s","backoff_max":"5m0s","backlog":3,"in_flight":1,"delivered":9,"acked":8,"redelivered":1,"dead_lettered":0,"dead_letter_topic":"%DLQ%orders.billing"}`
	f := newFakeServer(t, map[string]fakeResponse{
		"GET /v1/topics":                       okJSON(`{"topics":[{"name":"orders","queues":4,"fifo":false,"pending":12,"visible":40,"groups":[` + group + `]}]}`),
		"PUT /v1/topics/jobs":                  {201, `{"name":"jobs","queues":8,"fifo":true,"pending":0,"visible":0,"groups":[]}`},
		"GET /v1/topics/orders":                okJSON(`{"name":"orders","queues":4,"fifo":false,"pending":12,"visible":40,"groups":[` + group + `]}`),
		"GET /v1/topics/orders/groups":         okJSON(`{"groups":[` + group + `]}`),
		"PUT /v1/topics/orders/groups/billing": {409, `{"error":{"code":"already_exists","message":"group \"billing\" of topic \"orders\" exists"}}`},
		"GET /v1/stats":                        okJSON(`{"pending":12,"sent":52,"fired":40,"cancelled":0,"rescheduled":1,"lateness_count":40,"lateness_p50_ms":1,"lateness_p99_ms":null,"recovery_seconds":0.25,"clock_jumps":0}`),
	})
	r := newRunner(t, f.env())

	res := r.run("topics")
	res.wantCode(t, ExitOK)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "TOPIC QUEUES FIFO PENDING VISIBLE GROUPS" ||
		strings.Join(strings.Fields(lines[1]), " ") != "orders 4 false 12 40 1" {
		t.Errorf("topics table:\n%s", res.stdout)
	}

	res = r.run("topics", "create", "jobs", "--queues", "8", "--fifo")
	res.wantCode(t, ExitOK)
	if res.stdout != "created FIFO topic jobs with 8 queues\n" {
		t.Errorf("create: %q", res.stdout)
	}

	res = r.run("topics", "describe", "orders")
	res.wantCode(t, ExitOK)
	if !strings.Contains(squash(res.stdout), "pending: 12") || !strings.Contains(res.stdout, "%DLQ%orders.billing") {
		t.Errorf("describe:\n%s", res.stdout)
	}

	res = r.run("groups", "--topic", "orders")
	res.wantCode(t, ExitOK)
	lines = strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "billing 3 1 9 8 1 0 16 1s..5m %DLQ%orders.billing" {
		t.Errorf("groups table:\n%s", res.stdout)
	}

	res = r.run("groups", "create", "billing", "--topic", "orders", "--max-attempts", "5", "--backoff-base", "2s", "--backoff-max", "1m")
	res.wantCode(t, ExitFailed)
	if !strings.Contains(res.stderr, "already_exists (HTTP 409)") {
		t.Errorf("groups create stderr %q", res.stderr)
	}

	res = r.run("stats")
	res.wantCode(t, ExitOK)
	if !strings.Contains(squash(res.stdout), "lateness: p50 <= 1ms, p99 n/a over 40 messages") || !strings.Contains(squash(res.stdout), "recovery: 0.250s") {
		t.Errorf("stats:\n%s", res.stdout)
	}

	reqs := f.requests()
	if b := reqs[1].Body; b["queues"] != float64(8) || b["fifo"] != true {
		t.Errorf("create topic body %v", b)
	}
	if b := reqs[4].Body; !reflect.DeepEqual(b, map[string]any{"max_attempts": float64(5), "backoff_base": "2s", "backoff_max": "1m0s"}) {
		t.Errorf("create group body %v", b)
	}

	if res := r.run("topics", "rename", "x"); res.code != ExitUsage || !strings.Contains(res.stderr, `unknown subcommand "rename"`) {
		t.Errorf("unknown subcommand: %+v", res)
	}
	if res := r.run("groups"); res.code != ExitUsage || !strings.Contains(res.stderr, "--topic is required") {
		t.Errorf("groups without topic: %+v", res)
	}
}

func TestAckNackRedrive(t *testing.T) {
	f := newFakeServer(t, map[string]fakeResponse{
		"POST /v1/topics/t/groups/g/ack":     okJSON(`{"acked":2}`),
		"POST /v1/topics/t/groups/g/nack":    okJSON(`{}`),
		"POST /v1/topics/t/groups/g/redrive": okJSON(`{"redriven":7}`),
	})
	r := newRunner(t, f.env())
	if res := r.run("ack", "--topic", "t", "--group", "g", "r1", "r2"); res.code != 0 || res.stdout != "acked 2\n" {
		t.Errorf("ack: %+v", res)
	}
	if res := r.run("nack", "--topic", "t", "--group", "g", "--delay", "5s", "r1"); res.code != 0 || res.stdout != "nacked: redelivery in 5s\n" {
		t.Errorf("nack: %+v", res)
	}
	if res := r.run("redrive", "--topic", "t", "--group", "g", "--max", "10"); res.code != 0 || res.stdout != "redrove 7 messages to group g of t\n" {
		t.Errorf("redrive: %+v", res)
	}
	reqs := f.requests()
	if !reflect.DeepEqual(reqs[0].Body, map[string]any{"receipts": []any{"r1", "r2"}}) ||
		!reflect.DeepEqual(reqs[1].Body, map[string]any{"receipt": "r1", "delay": "5s"}) ||
		!reflect.DeepEqual(reqs[2].Body, map[string]any{"max": float64(10)}) {
		t.Errorf("bodies %+v", reqs)
	}
	if res := r.run("ack", "--topic", "t", "--group", "g"); res.code != ExitUsage {
		t.Errorf("ack without receipts: %+v", res)
	}
	if res := r.run("nack", "--topic", "t", "--group", "g", "a", "b"); res.code != ExitUsage {
		t.Errorf("nack with two receipts: %+v", res)
	}
}

func TestNetworkErrorExits1(t *testing.T) {
	f := newFakeServer(t, nil)
	url := f.srv.URL
	f.srv.Close()
	res := newRunner(t, map[string]string{"HOURGLASS_SERVER": url}).run("stats")
	res.wantCode(t, ExitFailed)
	if !strings.Contains(res.stderr, "hourglass stats:") || !strings.Contains(res.stderr, "connect") {
		t.Errorf("stderr %q", res.stderr)
	}
}

// squash collapses runs of spaces, so checks do not depend on alignment.
func squash(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
