package cli

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestBadFlagValueIsOneLine: a mistyped flag value names the mistake and
// where the usage is, instead of printing the whole flag list.
func TestBadFlagValueIsOneLine(t *testing.T) {
	r := newRunner(t, nil)
	res := r.run("send", "--topic", "t", "--delay", "5x", "body")
	res.wantCode(t, ExitUsage)
	if !strings.Contains(res.stderr, `invalid value "5x" for flag -delay: want a duration such as 500ms, 10s`) || !strings.Contains(res.stderr, "run 'hourglass send --help' for usage") {
		t.Errorf("stderr does not name the bad value and the help: %q", res.stderr)
	}
	if n := strings.Count(res.stderr, "\n"); n > 3 {
		t.Errorf("a bad flag printed %d lines, want at most 3:\n%s", n, res.stderr)
	}
	if strings.Contains(res.stderr, "flags:") {
		t.Errorf("a bad flag printed the flag list:\n%s", res.stderr)
	}
	res = r.run("send", "--topic", "t", "--level", "three", "body")
	if res.code != ExitUsage || !strings.Contains(res.stderr, `invalid value "three" for flag -level: want a whole number`) {
		t.Errorf("--level three: exit %d stderr %q", res.code, res.stderr)
	}
	// --help still prints everything, on stdout when asked through help.
	res = r.run("send", "--help")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stderr+res.stdout, "flags:") || !strings.Contains(res.stderr+res.stdout, "-ttl") {
		t.Errorf("send --help lacks the flag list:\n%s%s", res.stdout, res.stderr)
	}
}

// TestVersionFlag: --version is the version command.
func TestVersionFlag(t *testing.T) {
	r := newRunner(t, nil)
	want := r.run("version")
	want.wantCode(t, ExitOK)
	for _, spelling := range []string{"--version", "-version", "-v"} {
		res := r.run(spelling)
		res.wantCode(t, ExitOK)
		if res.stdout != want.stdout || res.stdout == "" {
			t.Errorf("%s printed %q, want %q", spelling, res.stdout, want.stdout)
		}
	}
}

// TestConnectionRefusedHint: a client command against a port nobody
// listens on says that the broker may not be running.
func TestConnectionRefusedHint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	r := newRunner(t, map[string]string{"HOURGLASS_SERVER": "http://" + addr})
	res := r.run("inspect", "00ff")
	res.wantCode(t, ExitFailed)
	if !strings.Contains(res.stderr, "connection refused") || !strings.Contains(res.stderr, "is one running ('hourglass serve')") {
		t.Errorf("stderr lacks the hint: %q", res.stderr)
	}
}

// TestSendHelpSaysTTLCountsFromTheSend: the example in send --help states
// what the broker does (checked on a virtual clock in the engine's
// deadline tests): a ttl counts from the send, not from the due time.
func TestSendHelpSaysTTLCountsFromTheSend(t *testing.T) {
	res := newRunner(t, nil).run("help", "send")
	res.wantCode(t, ExitOK)
	if strings.Contains(res.stdout, "expired after 3h") || !strings.Contains(res.stdout, "expires 2h after the send") {
		t.Errorf("send help misstates the ttl:\n%s", res.stdout)
	}
}

// TestInspectShowsDeadline: inspect prints what the send asked for (the
// deadline, window and dedup ID) and says when the deadline has passed.
func TestInspectShowsDeadline(t *testing.T) {
	passed := now.Add(-time.Minute).UnixMilli()
	info := `{"id":"00ff","state":"visible","topic":"orders","queue":1,"due":` + itoa(now.Add(-2*time.Hour).UnixMilli()) +
		`,"sent":` + itoa(now.Add(-3*time.Hour).UnixMilli()) + `,"visible":0,"body_bytes":1,"deadline":` + itoa(passed) +
		`,"window":60000,"dedup_id":"pay-42"}`
	f := newFakeServer(t, map[string]fakeResponse{"GET /v1/messages/00ff": okJSON(info)})
	res := newRunner(t, f.env()).run("inspect", "00ff")
	res.wantCode(t, ExitOK)
	for _, want := range []string{"deadline:", "(1m0s ago)", "passed: groups that had not received it dead-letter it, reason expired",
		"window:       1m0s", "dedup id:     pay-42", "groups:       hourglass trace 00ff shows each group's"} {
		if !strings.Contains(squash(res.stdout), squash(want)) {
			t.Errorf("inspect output lacks %q:\n%s", want, res.stdout)
		}
	}
}
