package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// The kill -9 test runs the engine in a child process (this test binary,
// re-executed with crashChildEnv set) on a real directory, with the real
// clock and sync flush, and kills it with SIGKILL at a random moment, many
// times over. The child reports on stdout, one line per event, what it
// started and what the engine acknowledged; a line printed means
// acknowledged. The parent keeps the ledger and, after the last cycle,
// opens the directory itself and checks that the engine lost nothing.
const (
	crashChildEnv  = "HOURGLASS_CRASH_CHILD"  // data directory; set only in the child
	crashCyclesEnv = "HOURGLASS_CRASH_CYCLES" // number of kill cycles (soak runs)
	crashSeedEnv   = "HOURGLASS_CRASH_SEED"   // to replay a run's random choices
)

// crashOptions are the engine options of the child and of the final check;
// a data directory must keep its bucket width, and the delay levels keep
// level-based sends within the test's 300 ms horizon. CheckpointBytes is
// small so that kills also land in checkpoints the log's size asked for.
func crashOptions(dir string, ckpt time.Duration) Options {
	return Options{
		Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Flush: FlushSync,
		SegmentBytes: 32 << 10, DefaultQueues: 3, CheckpointInterval: ckpt, CheckpointBytes: 16 << 10,
		Limits: message.Limits{DelayLevels: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}},
	}
}

func TestCrashKill9(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir) // does not return
	}
	cycles, seed := crashCyclesAndSeed(t)
	t.Logf("seed %d (set %s to replay the parent's choices; the children's timing is not reproducible)", seed, crashSeedEnv)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	var events []event
	var lastKill int64
	var kills []int64
	var acks, doubts int
	var lifetime time.Duration
	start := time.Now()
	for c := 0; c < cycles; c++ {
		res := runCrashChild(t, dir, c, seed, rng)
		// The offline check is the oracle of the files after every kill
		// (the next child's recovery faces them) and every recovery.
		if err := checkOracle(vfs.OS, crashOptions(dir, time.Second)); err != nil {
			t.Fatalf("cycle %d: after kill -9: %v", c, err)
		}
		for i := range res.events {
			res.events[i].cycle = c
		}
		events = append(events, res.events...)
		lastKill = res.killedAt
		kills = append(kills, res.killedAt)
		acks += res.acked
		doubts += res.doubts
		lifetime += res.lifetime
	}
	t.Logf("%d kill cycles in %v: %d operations acknowledged, %d in doubt at a kill, mean time from ready to kill %v",
		cycles, time.Since(start).Round(time.Millisecond), acks, doubts, (lifetime / time.Duration(cycles)).Round(time.Millisecond))
	if acks < cycles {
		t.Fatalf("only %d acknowledged operations in %d cycles: the children did not get to work", acks, cycles)
	}

	// The final check: recover the directory here and wait until every
	// message that may exist is due and dispatched.
	e, err := Open(crashOptions(dir, time.Second))
	if err != nil {
		t.Fatalf("final open: %v", err)
	}
	defer e.Close()
	m := buildModel(events)
	horizon := max(m.horizon(), lastKill+1000)
	deadline := time.Now().Add(30 * time.Second)
	for e.Now() <= horizon || !settled(e, horizon) {
		if time.Now().After(deadline) {
			t.Fatalf("the recovered engine did not settle at %d: %s", horizon, engineState(e))
		}
		time.Sleep(10 * time.Millisecond)
	}
	now := e.Now()
	m.retiredBefore = now - e.opts.Retention.Milliseconds()
	rep := checkEngine(e, m, now)
	t.Logf("after %d kill -9 cycles: %s", cycles, rep)
	if rep.failures() > 0 {
		t.Errorf("the engine broke its promises across kill -9 (seed %d): %s", seed, rep)
		t.Logf("kill times (Unix ms) by cycle: %v", kills)
		explainCrash(t, rep, events)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := checkOracle(vfs.OS, crashOptions(dir, time.Second)); err != nil {
		t.Errorf("after the final recovery and close: %v", err)
	}
}

// crashCyclesAndSeed gives the number of kill cycles (50, 10 with -short,
// or the environment's) and the parent's seed (the time, or the
// environment's, to replay a run).
func crashCyclesAndSeed(t *testing.T) (cycles int, seed uint64) {
	t.Helper()
	cycles = 50
	if s := os.Getenv(crashCyclesEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q is not a positive number", crashCyclesEnv, s)
		}
		cycles = n
	} else if testing.Short() {
		cycles = 10
		t.Logf("-short: %d kill cycles, not 50; `make test-durability` (CI) runs the full size", cycles)
	}
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, s, err)
		}
		seed = v
	}
	return cycles, seed
}

// crashChildResult is what the parent learned from one child.
type crashChildResult struct {
	events        []event
	acked, doubts int
	killedAt      int64 // Unix ms
	lifetime      time.Duration
}

// runCrashChild starts a child on dir, kills it 20 to 200 ms after it is
// ready, and returns the ledger of what it reported.
func runCrashChild(t *testing.T, dir string, cycle int, seed uint64, rng *rand.Rand) crashChildResult {
	t.Helper()
	ckpt := time.Duration(10+rng.IntN(90)) * time.Millisecond
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(),
		crashChildEnv+"="+dir,
		"HOURGLASS_CRASH_CHILD_CYCLE="+strconv.Itoa(cycle),
		"HOURGLASS_CRASH_CHILD_SEED="+strconv.FormatUint(seed+uint64(cycle), 10),
		"HOURGLASS_CRASH_CHILD_CKPT="+ckpt.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	parsed := make(chan crashChildResult, 1)
	go func() { parsed <- parseCrashChild(out, ready) }()
	var readyAt time.Time
	select {
	case <-ready:
		readyAt = time.Now()
	case <-parsed:
		cmd.Wait()
		t.Fatalf("cycle %d: the child ended before it was ready; stderr:\n%s", cycle, stderr.String())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("cycle %d: the child did not get ready; stderr:\n%s", cycle, stderr.String())
	}
	time.Sleep(time.Duration(20+rng.IntN(181)) * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("cycle %d: kill: %v", cycle, err)
	}
	res := <-parsed
	res.killedAt = time.Now().UnixMilli()
	res.lifetime = time.Since(readyAt)
	werr := cmd.Wait()
	if bytes.Contains(stderr.Bytes(), []byte("DATA RACE")) || bytes.Contains(stderr.Bytes(), []byte("panic")) ||
		bytes.Contains(stderr.Bytes(), []byte("FATAL")) {
		t.Fatalf("cycle %d: the child failed: %v\n%s", cycle, werr, stderr.String())
	}
	if ee, ok := werr.(*exec.ExitError); !ok || ee.Exited() {
		t.Fatalf("cycle %d: the child was not killed but ended by itself: %v\n%s", cycle, werr, stderr.String())
	}
	return res
}

// parseCrashChild reads a child's report until it dies and turns it into
// ledger events: acknowledged and failed operations as they come, and the
// operations it started and never answered as doubts at the end.
func parseCrashChild(r io.Reader, ready chan<- struct{}) crashChildResult {
	var res crashChildResult
	started := map[string]event{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "HG" {
			continue
		}
		switch {
		case f[1] == "READY":
			close(ready)
		case f[1] == "TRY" && len(f) >= 4:
			ev := event{state: evDoubt}
			switch f[2] {
			case "S":
				ev.kind, ev.topic, ev.key, ev.body = evSend, f[4], f[5], f[6]
				if ev.key == "-" {
					ev.key = ""
				}
			case "C":
				ev.kind, ev.id = evCancel, mustParseID(f[4])
			case "R":
				ev.kind, ev.id = evResched, mustParseID(f[4])
				ev.lo, _ = strconv.ParseInt(f[5], 10, 64)
			}
			started[f[3]] = ev
		case f[1] == "OK" && len(f) >= 3:
			ev, ok := started[f[2]]
			if !ok {
				continue
			}
			delete(started, f[2])
			ev.state = evAcked
			switch ev.kind {
			case evSend:
				ev.id = mustParseID(f[3])
				ev.due, _ = strconv.ParseInt(f[4], 10, 64)
			case evResched:
				ev.due, _ = strconv.ParseInt(f[3], 10, 64)
			}
			ev.seen = time.Now().UnixMilli()
			res.events = append(res.events, ev)
			res.acked++
		case f[1] == "ERR" && len(f) >= 3:
			delete(started, f[2]) // an answered failure has no effect
		}
	}
	now := time.Now().UnixMilli()
	for _, ev := range started {
		// A reschedule in doubt may have been given any due time from the
		// one asked for up to the broker's time when it died.
		ev.hi = max(ev.lo, now)
		res.events = append(res.events, ev)
		res.doubts++
	}
	return res
}

// explainCrash logs, for every message a failure names, what the ledger
// knows of it: each operation on it, its state, child and time.
func explainCrash(t *testing.T, rep *report, events []event) {
	t.Helper()
	for _, p := range rep.problems {
		f := strings.Fields(p)
		if len(f) == 0 {
			continue
		}
		id, err := message.ParseID(f[0])
		if err != nil {
			continue
		}
		for _, ev := range events {
			if ev.id == id {
				t.Logf("  %v: kind %d state %d cycle %d answered at %d due %d [%d, %d] body %q",
					id, ev.kind, ev.state, ev.cycle, ev.seen, ev.due, ev.lo, ev.hi, ev.body)
			}
		}
	}
}

func mustParseID(s string) message.ID {
	id, err := message.ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// crashChild is the child: it opens the engine on dir and has four
// goroutines send, cancel and reschedule until it is killed.
func crashChild(dir string) {
	cycle, _ := strconv.Atoi(os.Getenv("HOURGLASS_CRASH_CHILD_CYCLE"))
	seed, _ := strconv.ParseUint(os.Getenv("HOURGLASS_CRASH_CHILD_SEED"), 10, 64)
	ckpt, _ := time.ParseDuration(os.Getenv("HOURGLASS_CRASH_CHILD_CKPT"))
	e, err := Open(crashOptions(dir, ckpt))
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL open: %v\n", err)
		os.Exit(3)
	}
	w := &crashReporter{}
	w.say("READY")
	for g := 0; g < 4; g++ {
		go crashWorker(e, w, cycle, g, rand.New(rand.NewPCG(seed, uint64(g))))
	}
	// The parent kills the child; this only ends an orphan.
	time.Sleep(time.Minute)
	fmt.Fprintln(os.Stderr, "FATAL the parent did not kill the child")
	os.Exit(4)
}

// crashReporter writes whole lines to stdout, unbuffered, so that a line
// the parent reads was printed after the call it reports returned.
type crashReporter struct{ mu sync.Mutex }

func (r *crashReporter) say(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := fmt.Fprintf(os.Stdout, "HG "+format+"\n", args...); err != nil {
		os.Exit(5) // the parent is gone
	}
}

func crashWorker(e *Engine, w *crashReporter, cycle, g int, rng *rand.Rand) {
	type mine struct {
		id  message.ID
		due int64
	}
	var pending []mine
	ctx := context.Background()
	for seq := 0; ; seq++ {
		tag := fmt.Sprintf("%d-%d", g, seq)
		now := time.Now().UnixMilli()
		kept := pending[:0]
		for _, p := range pending {
			if p.due > now+5 {
				kept = append(kept, p)
			}
		}
		pending = kept
		p := rng.IntN(100)
		switch {
		case p < 15 && len(pending) > 0:
			i := rng.IntN(len(pending))
			target := pending[i]
			w.say("TRY C %s %s", tag, target.id)
			if err := e.Cancel(ctx, target.id); err != nil {
				w.say("ERR %s %s", tag, errs.CodeOf(err))
				continue
			}
			w.say("OK %s", tag)
			pending = append(pending[:i], pending[i+1:]...)
		case p < 30 && len(pending) > 0:
			i := rng.IntN(len(pending))
			at := now + rng.Int64N(300)
			w.say("TRY R %s %s %d", tag, pending[i].id, at)
			due, err := e.Reschedule(ctx, pending[i].id, message.When{At: at}, 0)
			if err != nil {
				w.say("ERR %s %s", tag, errs.CodeOf(err))
				continue
			}
			w.say("OK %s %d", tag, due)
			pending[i].due = due
		default:
			topic := []string{"ka", "kb"}[rng.IntN(2)]
			key := "-"
			if rng.IntN(3) == 0 {
				key = fmt.Sprintf("g%d-k%d", g, rng.IntN(4))
			}
			body := fmt.Sprintf("c%d-%s", cycle, tag)
			var when message.When
			switch q := rng.IntN(10); {
			case q == 0:
			case q == 1:
				when.At = now - 1 - rng.Int64N(1000)
			case q == 2:
				when.Level = 1 + rng.IntN(3)
			case q == 3:
				when.At = now + rng.Int64N(300)
			default:
				when.Delay = time.Duration(rng.IntN(300)) * time.Millisecond
			}
			w.say("TRY S %s %s %s %s", tag, topic, key, body)
			m := message.Message{Topic: topic, Body: []byte(body)}
			if key != "-" {
				m.Key = key
			}
			r, err := e.Send(ctx, m, when)
			if err != nil {
				w.say("ERR %s %s", tag, errs.CodeOf(err))
				continue
			}
			w.say("OK %s %s %d", tag, r.ID, r.Due)
			pending = append(pending, mine{r.ID, r.Due})
		}
	}
}
