package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/hourglass-mq/hourglass/api"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestHostileInput: input that encoding/json or ServeMux would rewrite,
// or that the API used to accept wrongly, is refused with 400
// invalid_argument and a message naming the field; nothing is stored.
func TestHostileInput(t *testing.T) {
	ts := newTestServer(t)
	ts.call("PUT", "/v1/topics/t", nil, http.StatusCreated, nil)
	ts.call("PUT", "/v1/topics/t/groups/g", nil, http.StatusCreated, nil)
	sentBefore := ts.eng.Stats().Sent.Load()

	const send = "/v1/topics/t/messages"
	cases := []struct {
		name, method, path, body string
		inMessage                string
	}{
		// Invalid UTF-8, raw in the body: the decoder would store U+FFFD.
		{"raw invalid key", "POST", send, "{\"key\":\"order-\xff\",\"body\":\"x\"}", `field "key" is not valid UTF-8`},
		{"raw invalid tag", "POST", send, "{\"tag\":\"\xc3\",\"body\":\"x\"}", `field "tag" is not valid UTF-8`},
		{"raw invalid group", "POST", send, "{\"group\":\"\xed\xa0\x80\"}", `field "group" is not valid UTF-8`},
		{"raw invalid property value", "POST", send, "{\"properties\":{\"k\":\"v\xfe\"}}", `field "properties.k" is not valid UTF-8`},
		{"raw invalid property name", "POST", send, "{\"properties\":{\"k\xfe\":\"v\"}}", `is not valid UTF-8`},
		{"raw invalid body", "POST", send, "{\"body\":\"\x80\"}", "body_base64"},
		{"raw invalid in batch", "POST", "/v1/topics/t/batch", "{\"messages\":[{\"body\":\"ok\"},{\"key\":\"\xff\"}]}", `field "messages[1].key" is not valid UTF-8`},
		{"raw invalid receipt", "POST", "/v1/topics/t/groups/g/ack", "{\"receipts\":[\"\xff\"]}", `field "receipts[0]" is not valid UTF-8`},
		// Escaped lone surrogates: the decoder would store U+FFFD too.
		{"lone high surrogate", "POST", send, `{"key":"a\ud800b"}`, `field "key" holds the escape \ud800`},
		{"lone low surrogate", "POST", send, `{"properties":{"k":"\udc00"}}`, `\udc00, a lone UTF-16 surrogate`},
		{"reversed pair", "POST", send, `{"tag":"\udc00\ud800"}`, `lone UTF-16 surrogate`},
		{"high then non-surrogate", "POST", send, `{"tag":"\ud800\u0041"}`, `\ud800`},
		// What the decoder would resolve by guessing.
		{"duplicate key", "POST", send, `{"key":"a","key":"b"}`, `field "key" appears more than once`},
		{"duplicate delivery", "POST", send, `{"delay":"1h","delay":"1s"}`, `field "delay" appears more than once`},
		{"duplicate property", "POST", send, `{"properties":{"k":"1","k":"2"}}`, `field "properties.k" appears more than once`},
		{"case-variant field", "POST", send, `{"Body":"x"}`, `did you mean "body"`},
		{"case-variant and exact", "POST", send, `{"body":"x","BODY":"y"}`, `"BODY"`},
		{"null property", "POST", send, `{"properties":{"k":null}}`, `field "properties.k" is null`},
		{"null receipt", "POST", "/v1/topics/t/groups/g/ack", `{"receipts":[null]}`, `field "receipts[0]" is null`},
		{"trailing garbage", "POST", send, `{"body":"x"} trailing`, "after the JSON object"},
		{"trailing object", "PUT", "/v1/topics/t2", `{} {"fifo":true}`, "after the JSON object"},
		// Names "." and "..", percent-encoded past ServeMux's cleaning.
		{"send to ..", "POST", "/v1/topics/%2e%2e/messages", `{"body":"x"}`, `topic ".." is reserved`},
		{"send to .", "POST", "/v1/topics/%2E/messages", `{"body":"x"}`, `topic "." is reserved`},
		{"create ..", "PUT", "/v1/topics/%2e%2e", ``, `topic ".." is reserved`},
		{"group ..", "PUT", "/v1/topics/t/groups/%2e%2e", ``, `group ".." is reserved`},
		{"receive group .", "POST", "/v1/topics/t/groups/%2e/receive", ``, `group "." is reserved`},
		{"list groups of ..", "GET", "/v1/topics/%2e%2e/groups", ``, "reserved"},
		// Invalid UTF-8 in path values.
		{"topic path", "POST", "/v1/topics/a%ff/messages", `{"body":"x"}`, "not valid UTF-8"},
		{"key path", "GET", "/v1/topics/t/keys/%ff%fe", ``, "{key}"},
		{"group path", "PUT", "/v1/topics/t/groups/%c3", ``, "not valid UTF-8"},
		// Numbers and durations.
		{"at beyond int64", "POST", send, `{"at":99999999999999999999}`, `"at"`},
		{"at as float", "POST", send, `{"at":1.5e12}`, `"at"`},
		{"at max int64", "POST", send, `{"at":9223372036854775807}`, "at 9223372036854775807 is beyond the maximum delay"},
		{"delay NaN", "POST", send, `{"delay":"NaN"}`, `delay "NaN"`},
		{"delay overflows", "POST", send, `{"delay":"9999999999h"}`, `delay "9999999999h"`},
		{"delay as number", "POST", send, `{"delay":5}`, `"delay"`},
		{"level as float", "POST", send, `{"level":1.5}`, `"level"`},
		{"negative wait", "POST", "/v1/topics/t/groups/g/receive", `{"wait":"-1s"}`, "wait"},
		{"negative max", "POST", "/v1/topics/t/groups/g/receive", `{"max":-1}`, "max -1"},
		{"negative invisible", "POST", "/v1/topics/t/groups/g/receive", `{"invisible":"-5s"}`, `invisible "-5s" must be positive`},
		{"negative redrive", "POST", "/v1/topics/t/groups/g/redrive", `{"max":-3}`, "max"},
		{"zero backoff", "PUT", "/v1/topics/t/groups/g2", `{"backoff_base":"0s"}`, `backoff_base "0s" must be positive`},
		{"negative backoff", "PUT", "/v1/topics/t/groups/g2", `{"backoff_max":"-1m"}`, `backoff_max "-1m" must be positive`},
		{"negative nack delay", "POST", "/v1/topics/t/groups/g/nack", `{"receipt":"r","delay":"-1s"}`, "delay"},
		// A query parameter no endpoint takes.
		{"query", "GET", "/v1/topics/t?verbose=1", ``, "takes no query parameters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts.t = t
			r := ts.do(c.method, c.path, c.body)
			ts.wantError(r, http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(r.errorMessage(), c.inMessage) {
				t.Fatalf("message %q does not mention %q", r.errorMessage(), c.inMessage)
			}
			if strings.ContainsRune(r.errorMessage(), '\uFFFD') {
				t.Fatalf("message %q shows a replacement character, not the bytes sent", r.errorMessage())
			}
		})
	}
	ts.t = t
	checkNothingStored(t, ts, sentBefore)
}

// checkNothingStored checks that refused requests stored no message (the
// sent count is still sentBefore) and created no topic but t nor group
// but g.
func checkNothingStored(t *testing.T, ts *testServer, sentBefore uint64) {
	t.Helper()
	if got := ts.eng.Stats().Sent.Load(); got != sentBefore {
		t.Fatalf("%d messages were stored from refused requests", got-sentBefore)
	}
	var tl api.TopicList
	ts.call("GET", "/v1/topics", nil, http.StatusOK, &tl)
	for _, tp := range tl.Topics {
		if tp.Name != "t" {
			t.Errorf("a refused request created topic %q", tp.Name)
		}
		for _, g := range tp.Groups {
			if g.Name != "g" {
				t.Errorf("a refused request created group %q", g.Name)
			}
		}
	}
}

// TestStrictInputStillAccepts: the checks refuse only what they must;
// valid pairs of escapes, escaped backslashes, non-ASCII text and null for
// an optional field pass and are stored exactly.
func TestStrictInputStillAccepts(t *testing.T) {
	ts := newTestServer(t)
	var rc api.Receipt
	ts.call("POST", "/v1/topics/t/messages",
		`{"key":"k\ud83d\ude00","tag":"\\ud800","properties":{"é":"ünï"},"body":"日本","group":null,"delay":"1h"}`,
		http.StatusOK, &rc)
	var info api.MessageInfo
	ts.call("GET", "/v1/messages/"+rc.ID, nil, http.StatusOK, &info)
	if info.Key != "k\U0001F600" || info.Tag != `\ud800` || info.Properties["é"] != "ünï" || info.BodyBytes != len("日本") {
		t.Fatalf("stored %+v", info)
	}
}

// TestSlowBodyIsCutOff: a client that sends its headers and then dribbles
// the body is answered 400 and disconnected once -read-timeout has passed,
// not held open; one that dribbles its headers is disconnected after
// -read-header-timeout. A long poll is not cut by -read-timeout.
func TestSlowBodyIsCutOff(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	ts := newTestServer(t, withOptions(func(c *Options) {
		c.ReadHeaderTimeout = readTimeout
		c.ReadTimeout = readTimeout
	}))
	ts.call("PUT", "/v1/topics/t", nil, http.StatusCreated, nil)
	srv := NewHTTPServer(ts.h, ts.opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	t.Run("body", func(t *testing.T) {
		conn, start := slowClient(t, addr, "POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"body\":\"")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a slow body: %v", err)
		}
		took := time.Since(start)
		body, _ := io.ReadAll(resp.Body) // ends at EOF: the server closes the connection
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "read-timeout") {
			t.Fatalf("answer %d %s; want 400 naming -read-timeout", resp.StatusCode, body)
		}
		if !resp.Close {
			t.Errorf("the connection was kept open after a cut-off body")
		}
		if took < readTimeout || took > readTimeout+5*time.Second {
			t.Fatalf("answered after %v; the read timeout is %v", took, readTimeout)
		}
	})
	t.Run("headers", func(t *testing.T) {
		conn, start := slowClient(t, addr, "POST /v1/topics/t/messages HTTP/1.1\r\n")
		// The server closes without an answer; the read ends at EOF or
		// with a reset, within the timeout plus slack.
		n, _ := io.Copy(io.Discard, conn)
		took := time.Since(start)
		if took < readTimeout || took > readTimeout+5*time.Second {
			t.Fatalf("connection closed after %v (%d bytes read); the header timeout is %v", took, n, readTimeout)
		}
	})
	t.Run("long poll outlives the read timeout", func(t *testing.T) {
		client := &http.Client{}
		defer client.CloseIdleConnections()
		const wait = 3 * readTimeout
		start := time.Now()
		resp, err := client.Post("http://"+addr+"/v1/topics/t/groups/g/receive", "application/json", strings.NewReader(`{"wait":"900ms"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != http.StatusOK || took < wait {
			t.Fatalf("long poll: status %d after %v; want 200 after the full wait of %v", resp.StatusCode, took, wait)
		}
	})
}

// slowClient connects to addr, writes prefix, then goes on writing one
// byte every 20 ms until the test ends or a write fails. It returns the
// connection, with a deadline that bounds the test if the server never
// cuts it, and the time taken before the dial. The server's timeouts count
// from when it begins to read the connection, which may come before Dial
// returns here (the kernel completes the handshake, and under load the
// server's goroutine can run first): only a time taken before the dial is
// surely no later than the server's (a start taken after the dial made
// an answer at the full 300 ms look 5 ms early under load).
func slowClient(t *testing.T, addr, prefix string) (net.Conn, time.Time) {
	t.Helper()
	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, prefix); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		conn.Close()
		<-done
	})
	return conn, start
}

// TestHTTPServerBoundsEveryConnection: Run's server carries every limit of
// the configuration.
func TestHTTPServerBoundsEveryConnection(t *testing.T) {
	cfg := DefaultOptions()
	srv := NewHTTPServer(http.NotFoundHandler(), cfg, slog.Default())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout < MinWriteTimeout ||
		srv.IdleTimeout <= 0 || srv.MaxHeaderBytes < 200<<10 {
		t.Fatalf("unbounded server: %+v", srv)
	}
}

// FuzzCheckStrict: on any body the decoder accepts, the strict walk ends
// without panicking, and what it lets through decodes to exactly the
// strings sent: no replacement character appears that the body did not
// spell itself.
func FuzzCheckStrict(f *testing.F) {
	for _, seed := range []string{
		`{"key":"a","body":"x","properties":{"k":"v"}}`, "{\"key\":\"\xff\"}", `{"tag":"\ud800"}`,
		`{"key":"\ud83d\ude00","group":null}`, `{"messages":[{"body":"x"},{"key":"a","key":"b"}]}`, `{"Body":"x"}`,
		`{"properties":{"a":null}}`, `{"key":"\\\"\ufffd"}`, ` { "at" : 5 , "level" : 1 } `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in api.BatchRequest
		if json.Unmarshal(body, &in) != nil {
			var one api.SendMessage
			if json.Unmarshal(body, &one) != nil {
				return
			}
			in.Messages = []api.SendMessage{one}
			if checkStrict(body, reflect.TypeOf(&one)) != nil {
				return
			}
		} else if checkStrict(body, reflect.TypeOf(&in)) != nil {
			return
		}
		spelled := bytes.Contains(body, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`))
		for _, m := range in.Messages {
			strs := []string{m.Key, m.Tag, m.Group, m.Delay}
			for k, v := range m.Properties {
				strs = append(strs, k, v)
			}
			for _, s := range strs {
				if !utf8.ValidString(s) || (strings.ContainsRune(s, utf8.RuneError) && !spelled) {
					t.Fatalf("accepted %q, which decodes to the rewritten %q", body, s)
				}
			}
		}
	})
}
