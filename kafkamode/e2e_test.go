package kafkamode_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// These tests run against a real Kafka whose bootstrap address is in
// HOURGLASS_KAFKA (make test-kafka starts one with scripts/kafka.sh). Without
// it they skip, loudly; with HOURGLASS_KAFKA_REQUIRED=1 and no address they
// fail, so CI cannot pass by skipping them.
func kafkaAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("HOURGLASS_KAFKA")
	if addr == "" {
		if os.Getenv("HOURGLASS_KAFKA_REQUIRED") == "1" {
			t.Fatal("HOURGLASS_KAFKA_REQUIRED=1 but HOURGLASS_KAFKA (a Kafka bootstrap address) is not set")
		}
		t.Skip("SKIPPED: no real Kafka. Kafka mode end-to-end tests need HOURGLASS_KAFKA=host:port; run `make test-kafka`")
	}
	return addr
}

// TestMain removes the binary the end-to-end tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the hourglass command once per test run: the worker runs
// as a real process so a test can SIGKILL it. Under -race the binary has
// the race detector too, and a race in the worker fails the test that ran
// it (see startWorker).
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hourglass-kafka-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "hourglass")
		args := []string{"build", "-o", binPath}
		if raceBuild {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/hourglass-mq/hourglass/cmd/hourglass")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// env is one test's Kafka: unique topic and group names.
type env struct {
	t                             *testing.T
	addr                          string
	delay, dlq, biz, group, state string
	cl                            *kgo.Client
	man                           *kgo.Client // lazily, see manual
	// copies is set when the worker writes to the delay topic (copies
	// forward): its log then ends in a transaction marker, one offset the
	// group never commits past (the consumer is not given it), so settle
	// takes end-1 as resolved.
	copies bool
}

func newEnv(t *testing.T, partitions int32) *env {
	addr := kafkaAddr(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	e := &env{t: t, addr: addr, delay: "hg-" + id + ".delay", biz: "hg-" + id + ".biz", group: "hg-" + id}
	e.dlq, e.state = e.delay+".dlq", e.delay+".state"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	e.cl = cl
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, e.delay); err != nil {
		t.Fatalf("create %s: %v", e.delay, err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, e.biz); err != nil {
		t.Fatalf("create %s: %v", e.biz, err)
	}
	return e
}

// worker is a running `hourglass kafka` process.
type worker struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

func (e *env) startWorker(id string, extra ...string) *worker {
	e.t.Helper()
	args := append([]string{"kafka", "--brokers", e.addr, "--delay-topic", e.delay, "--group", e.group,
		"--worker-id", id, "--session-timeout", "6s", "--txn-timeout", "10s", "--log-level", "info"}, extra...)
	cmd := exec.Command(binary(e.t), args...)
	w := &worker{cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: w.out}, cmd.Stdout
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(w.done) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-w.done
		}
		if strings.Contains(w.out.String(), "WARNING: DATA RACE") {
			e.t.Errorf("worker %s has a data race", id)
		}
		if e.t.Failed() {
			e.t.Logf("worker %s output:\n%s", id, w.out.String())
		}
	})
	return w
}

// kill SIGKILLs the worker and waits until it is gone.
func (w *worker) kill(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w.done
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// msg is one delayed message a test produces.
type msg struct {
	id      string
	due     int64 // Unix ms
	headers []kgo.RecordHeader
}

// produce writes delayed records for msgs to the delay topic (key and value
// are the message ID) and records them in the ledger.
func (e *env) produce(l *ledger, msgs []msg) {
	e.t.Helper()
	e.produceWith(e.cl, l, msgs, 0)
}

// produceWith is produce through cl, with partition set on each record
// (which only a manual partitioner heeds).
func (e *env) produceWith(cl *kgo.Client, l *ledger, msgs []msg, partition int32) {
	e.t.Helper()
	recs := make([]*kgo.Record, 0, len(msgs))
	for _, m := range msgs {
		h := append([]kgo.RecordHeader{
			{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(m.due, 10))},
			{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)},
		}, m.headers...)
		recs = append(recs, &kgo.Record{Topic: e.delay, Partition: partition, Key: []byte(m.id), Value: []byte(m.id), Headers: h})
		if l != nil {
			l.due[m.id] = m.due
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

// collector reads a topic with read_committed from its start and records
// each record's arrival.
type collector struct {
	mu   sync.Mutex
	recs []*kgo.Record
	arr  []arrival
	stop context.CancelFunc
	done chan struct{}
}

func (e *env) collect(topic string) *collector {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			at := time.Now().UnixMilli()
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				c.recs = append(c.recs, r)
				a := arrival{id: string(r.Value), at: at, stamped: r.Timestamp.UnixMilli(), dueHdr: -1}
				for _, h := range r.Headers {
					if h.Key == kafkamode.HeaderDueMs {
						a.dueHdr, _ = strconv.ParseInt(string(h.Value), 10, 64)
					}
				}
				c.arr = append(c.arr, a)
			})
			c.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.arr)
}

// waitFor polls until the collector holds n records or the deadline passes.
func (c *collector) waitFor(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for c.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d records within %v, want %d", c.count(), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle waits until every ledger message arrived (or within passed), then
// until the group has resolved every delay record (its committed offsets
// reach the delay topic's end), then writes a sentinel record to each
// partition of the business topic and waits until the collector has read
// them all. A read_committed consumer gets a sentinel only after every
// transaction before it is decided, so by then every forward the workers
// committed, duplicates included, has been read: no sleep decides that
// nothing more is coming.
func (e *env) settle(c *collector, l *ledger, within time.Duration) []arrival {
	t := e.t
	t.Helper()
	deadline := time.Now().Add(within)
	for c.count() < len(l.due) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	adm := kadm.NewClient(e.cl)
	for {
		ends, err := adm.ListEndOffsets(ctx, e.delay)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsets(ctx, e.group)
		if err != nil {
			t.Fatal(err)
		}
		resolved := true
		ends.Each(func(lo kadm.ListedOffset) {
			co, ok := committed.Lookup(e.delay, lo.Partition)
			end := lo.Offset
			if e.copies {
				end--
			}
			if end > 0 && (!ok || co.At < end) {
				resolved = false
			}
		})
		if resolved {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the group did not resolve every delay record within %v", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	parts, err := adm.ListEndOffsets(ctx, e.biz)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	parts.Each(func(lo kadm.ListedOffset) {
		r := &kgo.Record{Topic: e.biz, Partition: lo.Partition, Value: []byte("sentinel")}
		if err := e.manual().ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		n++
	})
	for {
		c.mu.Lock()
		seen := 0
		for _, r := range c.recs {
			if string(r.Value) == "sentinel" {
				seen++
			}
		}
		c.mu.Unlock()
		if seen >= n {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("saw %d of %d sentinels", seen, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.stop()
	<-c.done
	var out []arrival
	for _, a := range c.arr {
		if a.id != "sentinel" {
			out = append(out, a)
		}
	}
	return out
}

// manual is a producer that writes to the partition set on each record.
func (e *env) manual() *kgo.Client {
	e.t.Helper()
	if e.man == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			e.t.Fatal(err)
		}
		e.man = cl
		e.t.Cleanup(cl.Close)
	}
	return e.man
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// stop SIGTERMs the worker, waits for it to exit and returns the counters
// of its last log line ("kafka worker stopping ... name=value ...").
func (w *worker) stop(t *testing.T) map[string]int64 {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30 s of SIGTERM")
	}
	out := lineInts(w.out.String(), "kafka worker stopping")
	if len(out) == 0 {
		t.Fatalf("no final counters in the worker's output:\n%s", w.out.String())
	}
	return out
}

// lineInts parses the integer key=value fields of the lines of out that
// contain marker (a later line's value wins).
func lineInts(out, marker string) map[string]int64 {
	m := map[string]int64{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, marker) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					m[k] = n
				}
			}
		}
	}
	return m
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape reads a Prometheus text page into "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out, err := tryScrape(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return out
}

// tryScrape is scrape that returns its error (a worker still starting has
// no listener yet).
func tryScrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}
