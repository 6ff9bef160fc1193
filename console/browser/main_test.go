// Package browser_test drives the web console in a real headless Chromium
// (Debian's chromium package, through the DevTools protocol with chromedp)
// against the real hourglass binary: the forecast chart shows what was
// scheduled, find / cancel / reschedule change the broker, a broker with a
// token shows nothing without it, no request leaves the broker's origin, and
// the page logs no error. Screenshots of every page, light and dark, go to
// artifacts/console/ at the repository root (gitignored).
//
// Without chromium on PATH (or in HOURGLASS_CHROMIUM) the tests skip,
// saying so on stderr, unless HOURGLASS_REQUIRE_BROWSER=1, which CI sets:
// then they fail.
package browser_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/internal/clitest"
)

var (
	binary   string // the hourglass program, set up by TestMain (run)
	chromium string // the browser, "" when absent
)

func TestMain(m *testing.M) {
	clitest.RunIfChild() // a broker process the tests started (binary)
	chromium = findChromium()
	if chromium == "" {
		if os.Getenv("HOURGLASS_REQUIRE_BROWSER") == "1" {
			fmt.Fprintln(os.Stderr, "console browser tests: chromium is not installed and HOURGLASS_REQUIRE_BROWSER=1: failing (apt-get install chromium)")
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "console browser tests: SKIPPED, chromium is not installed (apt-get install chromium); set HOURGLASS_REQUIRE_BROWSER=1 to fail instead")
	}
	os.Exit(run(m))
}

// run sets the broker program up, when there is a browser to test it
// with, and runs the tests. The program is this test binary, which runs
// the hourglass command line in the processes started from it (package
// clitest): no go build is needed.
func run(m *testing.M) int {
	if chromium == "" {
		return m.Run()
	}
	var err error
	if binary, err = clitest.Binary(); err != nil {
		fmt.Fprintf(os.Stderr, "console browser tests: the test binary as hourglass: %v\n", err)
		return 1
	}
	return m.Run()
}

// findChromium returns the browser's path: $HOURGLASS_CHROMIUM, or the
// first of Debian's and other distributions' names on PATH.
func findChromium() string {
	if p := os.Getenv("HOURGLASS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// needBrowser skips the test, loudly, when there is no browser (TestMain
// has already failed the run if one was required).
func needBrowser(t testing.TB) {
	t.Helper()
	if chromium == "" {
		t.Skip("SKIPPED: chromium is not installed; HOURGLASS_REQUIRE_BROWSER=1 makes this a failure")
	}
}

// broker is a running hourglass serve.
type broker struct {
	t     testing.TB
	base  string
	token string
}

// startBroker runs hourglass serve on a fresh directory and a free port,
// with token (none when empty), and waits for it to listen.
func startBroker(t testing.TB, token string) *broker {
	t.Helper()
	return startBrokerOn(t, token, t.TempDir())
}

// startBrokerOn is startBroker on the data directory dir; extra are more
// flags of serve.
func startBrokerOn(t testing.TB, token, dir string, extra ...string) *broker {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--log-level", "warn"}, extra...)...)
	cmd.Env = append(os.Environ(), "HOURGLASS_AUTH_TOKEN="+token)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- u
			}
		}
		close(addr)
	}()
	select {
	case u, ok := <-addr:
		if !ok {
			t.Fatalf("hourglass serve ended before listening: %s", stderr.String())
		}
		return &broker{t: t, base: u, token: token}
	case <-time.After(30 * time.Second):
		t.Fatalf("hourglass serve did not listen within 30s: %s", stderr.String())
	}
	return nil
}

// call sends a JSON API request and decodes the answer into out, requiring
// status want.
func (b *broker) call(method, path string, in any, want int, out any) {
	b.t.Helper()
	var body io.Reader
	if in != nil {
		data, _ := json.Marshal(in)
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		b.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			b.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// info is the part of an inspect answer the tests read.
type info struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Due   int64  `json:"due"`
}

func (b *broker) inspectKey(topic, key string) info {
	b.t.Helper()
	var i info
	b.call("GET", "/v1/topics/"+url.PathEscape(topic)+"/keys/"+url.PathEscape(key), nil, http.StatusOK, &i)
	return i
}

// artifacts is where screenshots go: artifacts/console at the repository
// root, or $HOURGLASS_ARTIFACTS/console.
func artifacts(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("HOURGLASS_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// events is what the browser reported while a test ran.
type events struct {
	mu       sync.Mutex
	requests []string // every URL the page asked for
	errors   []string // exceptions, console errors, error log entries
	refused  []string // error log entries about a 401 answer
}

func (e *events) add(list *[]string, s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	*list = append(*list, s)
}

func (e *events) snapshot() (requests, errors, refused []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.requests...), append([]string(nil), e.errors...), append([]string(nil), e.refused...)
}

// checkClean fails the test if the page asked for anything outside the
// broker's origin or logged an error.
func (e *events) checkClean(t *testing.T, base string) {
	t.Helper()
	requests, errs, _ := e.snapshot()
	if len(requests) == 0 {
		t.Fatal("the browser reported no requests at all: the network listener is not working")
	}
	for _, u := range requests {
		if !strings.HasPrefix(u, base+"/") {
			t.Errorf("request outside the broker's origin %s: %s", base, u)
		}
	}
	for _, m := range errs {
		t.Errorf("browser error: %s", m)
	}
}
