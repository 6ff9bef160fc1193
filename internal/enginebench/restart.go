package main

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

const markerTopic = "restart-marker"

// Keys of the two marker messages of the restart scenario.
const (
	markerBefore = "due-1s-before-reopen"
	markerAfter  = "due-1s-after-reopen"
)

// runRestart reopens a data directory, sends two markers, closes, and
// reopens once more at a chosen instant: one marker fell due 1 s before
// that reopen started (it fell due while the broker was down), the other
// is due 1 s after. It reports how long each Open took and when each
// marker became visible, counted from the start of the second Open.
func runRestart(c config, dir string) (*report, error) {
	r := newReport("restart", dir)
	opts := engineOptions(dir)
	u, err := walkDisk(dir)
	if err != nil {
		return nil, err
	}
	app, _ := u.total()
	r.note("data directory of %s (%s files), reopened after a clean Close (final checkpoint written)", mib(app), humanInt(int64(sumFiles(u))))
	if c.dropCaches {
		r.note("cold: before every Open (the first, the second and the one after kill -9), sync and `echo 3 > /proc/sys/vm/drop_caches` emptied the page cache")
	}
	if err := dropCaches(c); err != nil {
		return r, err
	}
	t0 := time.Now()
	e, err := engine.Open(opts)
	if err != nil {
		return nil, err
	}
	open1 := time.Since(t0)
	r.fig("pending messages in the directory", humanInt(e.Stats().Pending.Load()))
	reportOpen(r, "first Open", open1, e.Stats())
	base, reopenAt, err := sendMarkers(r, e, c)
	if err != nil {
		return r, err
	}
	if err := dropCaches(c); err != nil {
		return r, err
	}
	time.Sleep(time.Until(time.UnixMilli(reopenAt)))

	t1 := time.Now()
	e, err = engine.Open(opts)
	if err != nil {
		return r, err
	}
	reportOpen(r, "second Open", time.Since(t1), e.Stats())
	if err := watchMarkers(r, e, c, base, reopenAt, t1); err != nil {
		return r, err
	}
	r.note("times of the second Open count from the call to engine.Open; a marker is \"seen\" when a reader waiting on VisibleSignal read it from the queue")
	pending := e.Stats().Pending.Load()
	if err := e.Close(); err != nil {
		return r, err
	}
	if c.crashFor > 0 {
		return r, crashRestart(c, dir, r, pending)
	}
	return r, nil
}

// reportOpen writes how long the Open named what took until it returned,
// and the recovery the engine reports in st.
func reportOpen(r *report, what string, took time.Duration, st *engine.Stats) {
	r.figT(what+": until Open returns", secs(took), "< 5 s with 10 M pending")
	r.fig(what+": Stats().RecoveryDuration()", fmt.Sprintf("%.3f s (%s log records replayed)", st.RecoveryDuration(), humanInt(int64(st.Replayed.Load()))))
}

// sendMarkers sends the two markers, due 1 s before and 1 s after the
// instant -marker from now at which the directory is to be reopened, then
// closes e (always, also on error). It returns the marker queue's length
// before the markers and that instant (Unix ms), and fails if Close ended
// after the first marker fell due.
func sendMarkers(r *report, e *engine.Engine, c config) (uint64, int64, error) {
	if err := e.CreateTopic(markerTopic, engine.TopicConfig{Queues: 1}); err != nil && errs.CodeOf(err) != errs.AlreadyExists {
		e.Close()
		return 0, 0, err
	}
	base := queueLen(e, markerTopic)
	reopenAt := e.Now() + c.marker.Milliseconds()
	_, err := e.SendBatch(bg, []engine.SendRequest{
		{Message: message.Message{Topic: markerTopic, Key: markerBefore}, When: message.When{At: reopenAt - 1000}},
		{Message: message.Message{Topic: markerTopic, Key: markerAfter}, When: message.When{At: reopenAt + 1000}},
	})
	if err != nil {
		e.Close()
		return 0, 0, err
	}
	cs := time.Now()
	if err := e.Close(); err != nil {
		return 0, 0, fmt.Errorf("close: %w", err)
	}
	r.fig("Close after the first Open", secs(time.Since(cs)))
	if time.Now().UnixMilli() >= reopenAt-1000 {
		return 0, 0, fmt.Errorf("Close ended after the first marker's due time; raise -marker (now %v)", c.marker)
	}
	return base, reopenAt, nil
}

// watchMarkers reads the marker queue of the reopened engine from offset
// base, waiting on VisibleSignal, until both markers were seen, and
// writes for each when it fell due and when it was seen, counted from t1,
// the start of the second Open.
func watchMarkers(r *report, e *engine.Engine, c config, base uint64, reopenAt int64, t1 time.Time) error {
	dueAt := map[string]time.Duration{
		markerBefore: time.UnixMilli(reopenAt - 1000).Sub(t1),
		markerAfter:  time.UnixMilli(reopenAt + 1000).Sub(t1),
	}
	seen := map[string]time.Duration{}
	late := map[string]int64{}
	off := base
	deadline := time.Now().Add(2*time.Minute + c.marker)
	for len(seen) < 2 {
		ch := e.VisibleSignal()
		vs, err := e.ReadQueue(markerTopic, 0, off, 16)
		if err != nil {
			return err
		}
		stamp := time.Since(t1)
		for _, v := range vs {
			seen[v.Message.Key] = stamp
			late[v.Message.Key] = v.Visible - v.Due
			off = v.Offset + 1
		}
		if len(vs) > 0 {
			continue
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			return errors.New("the markers did not become visible within 2 minutes of the reopen")
		}
	}
	for _, k := range []string{markerBefore, markerAfter} {
		r.fig("second Open: marker "+k+": due at, seen at", fmt.Sprintf("%+.3f s, %.3f s (index Visible - Due %d ms)",
			dueAt[k].Seconds(), seen[k].Seconds(), late[k]))
	}
	return nil
}

// crashRestart runs a child process that opens dir and sends keyed
// far-future messages until it is killed with SIGKILL c.crashFor after its
// first acknowledged batch; then it reopens dir, measures the recovery and
// checks that every acknowledged message is there.
func crashRestart(c config, dir string, r *report, before int64) error {
	cmd := exec.Command(os.Args[0], "-scenario", "crashchild", "-dir", dir, "-batch", strconv.Itoa(c.batch),
		"-checkpoint-bytes", strconv.FormatInt(c.childCkpt, 10))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	var acked atomic.Int64
	first := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "acked "), 10, 64); err == nil {
				if acked.Swap(n) == 0 {
					close(first)
				}
			}
		}
	}()
	select {
	case <-first:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		return errors.New("crash child acknowledged nothing within 5 minutes")
	}
	time.Sleep(c.crashFor)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	cmd.Wait()
	n := acked.Load()

	if err := dropCaches(c); err != nil {
		return err
	}
	t := time.Now()
	e, err := engine.Open(engineOptions(dir))
	if err != nil {
		return fmt.Errorf("open after kill -9: %w", err)
	}
	defer e.Close()
	took := time.Since(t)
	st := e.Stats()
	r.figT("after kill -9: until Open returns", secs(took), "< 5 s with 10 M pending")
	r.fig("after kill -9: Stats().RecoveryDuration(), log records replayed, log replayed (written since the last checkpoint)",
		fmt.Sprintf("%.3f s, %s, %s", st.RecoveryDuration(), humanInt(int64(st.Replayed.Load())), mib(int64(st.ReplayedBytes.Load()))))
	missing := 0
	for i := int64(0); i < n; i++ {
		if _, err := e.LookupKey(pendingTopic, crashKey(i)); err != nil {
			missing++
		}
	}
	r.fig("after kill -9: acknowledged messages missing", fmt.Sprintf("%d of %s (pending %s before the child, %s after)", missing, humanInt(n), humanInt(before), humanInt(st.Pending.Load())))
	r.note("kill -9: a child process opened the directory and sent keyed far-future messages (SendBatch of %d) until it was killed with SIGKILL %v after its first acknowledged batch; every acknowledged key was then looked up", c.batch, c.crashFor)
	if missing > 0 {
		return fmt.Errorf("%d acknowledged messages are missing after kill -9", missing)
	}
	return nil
}

// dropCaches, with -drop-caches, writes dirty pages and empties the page
// cache (needs root), so that the next Open reads the directory from the
// disk: a cold start, as after a reboot.
func dropCaches(c config) error {
	if !c.dropCaches {
		return nil
	}
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		return fmt.Errorf("-drop-caches: %w (it needs root)", err)
	}
	return nil
}

func crashKey(i int64) string { return "crash-" + strconv.FormatInt(i, 10) }

// runCrashChild is the child of crashRestart: it sends batches of keyed
// far-future messages and prints the acknowledged count after each, until
// it is killed.
func runCrashChild(c config, dir string) (*report, error) {
	opts := engineOptions(dir)
	opts.CheckpointBytes = c.childCkpt
	e, err := engine.Open(opts)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(3, 3))
	reqs := make([]engine.SendRequest, c.batch)
	body := make([]byte, pendingBody)
	for sent := int64(0); ; {
		now := e.Now()
		for j := range reqs {
			reqs[j] = engine.SendRequest{
				Message: message.Message{Topic: pendingTopic, Key: crashKey(sent + int64(j)), Body: body},
				When:    message.When{At: now + time.Hour.Milliseconds() + rng.Int64N(c.horizon.Milliseconds())},
			}
		}
		if _, err := e.SendBatch(bg, reqs); err != nil {
			return nil, err
		}
		sent += int64(len(reqs))
		fmt.Printf("acked %d\n", sent)
	}
}

func sumFiles(u diskUsage) int {
	n := 0
	for _, c := range components {
		n += u.files[c]
	}
	return n
}

// queueLen is the number of entries ever appended to a topic's queues.
func queueLen(e *engine.Engine, topic string) uint64 {
	for _, t := range e.Topics() {
		if t.Name == topic {
			var n uint64
			for _, l := range t.Lengths {
				n += l
			}
			return n
		}
	}
	return 0
}
