package loadtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

// Drill timing constants.
const (
	// minUp is the least time the broker runs between a restart and the
	// next kill, so that every kill interrupts a broker that was serving.
	minUp = 500 * time.Millisecond
	// slotSlack is added to the downtime to size each kill's slot in the
	// kill window.
	slotSlack = 2 * time.Second
	// readyTimeout bounds how long a (re)started broker may take to
	// answer its health check; recovery replays the log, which takes
	// time with millions of pending messages.
	readyTimeout = 5 * time.Minute
	// stopTimeout bounds a graceful stop at the end of a drill.
	stopTimeout = 30 * time.Second
)

// supervisor runs the broker as a child process on a fixed loopback
// address and data directory, so that a restart continues where the
// killed process stopped. It is used by one goroutine at a time: the
// drill's controller during the run, Main before and after.
type supervisor struct {
	binary  string
	dataDir string
	listen  string // 127.0.0.1:port, fixed for every start
	extra   []string
	// out receives the broker's stdout and stderr; tail keeps the end of
	// it for error messages.
	out  io.Writer
	tail *tailBuffer

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	health *client.Client
}

// newSupervisor picks a free loopback port. The port is released before
// the broker binds it, so another process could take it in between; the
// start then fails with the broker's own error.
func newSupervisor(binary, dataDir string, extra []string, log io.Writer) (*supervisor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tail := &tailBuffer{max: 16 << 10}
	var out io.Writer = tail
	if log != nil {
		out = io.MultiWriter(tail, log)
	}
	return &supervisor{
		binary: binary, dataDir: dataDir, listen: addr, extra: extra, out: out, tail: tail,
		health: client.New("http://"+addr, client.WithRetries(0)),
	}, nil
}

// url is the broker's base URL.
func (s *supervisor) url() string { return "http://" + s.listen }

// start starts the broker and waits until it answers its health check.
func (s *supervisor) start(ctx context.Context) error {
	args := append([]string{"serve", "--data-dir", s.dataDir, "--listen", s.listen}, s.extra...)
	cmd := exec.Command(s.binary, args...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.binary, err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	exited := s.exited
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(readyTimeout)
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.health.Health(hctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the broker exited before it was ready (%v); its output ended with:\n%s", waitErr, s.tail.String())
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("the broker was not ready within %s; its output ended with:\n%s", readyTimeout, s.tail.String())
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *supervisor) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// stop asks the broker to shut down (SIGINT) and kills it if it has not
// within stopTimeout.
func (s *supervisor) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
		s.cmd = nil
	case <-time.After(stopTimeout):
		s.kill()
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// killRecord is one kill and restart.
type killRecord struct {
	killed, restarted, ready time.Time
}

// drill kills and restarts the broker during a run. The kill window is
// divided into one slot per kill; each kill happens at a uniformly random
// moment of its slot, but not before the broker has been up for minUp.
type drill struct {
	sup      *supervisor
	kills    int
	downtime time.Duration
	window   time.Duration
	rng      *rand.Rand

	mu   sync.Mutex
	log  []killRecord
	isUp bool
}

// newDrill plans kills kills with the given downtime.
func newDrill(sup *supervisor, kills int, downtime time.Duration, seed uint64) *drill {
	return &drill{
		sup: sup, kills: kills, downtime: downtime, isUp: true,
		window: time.Duration(kills) * (downtime + slotSlack),
		rng:    rand.New(rand.NewPCG(seed, 0x6b696c6c)),
	}
}

// run performs the kills; the broker must be running. It returns when the
// last restarted broker is ready, or with an error when a restart failed.
func (d *drill) run(ctx context.Context, start time.Time) error {
	slot := d.window / time.Duration(d.kills)
	lastReady := start
	for i := range d.kills {
		at := start.Add(time.Duration(i)*slot + time.Duration(d.rng.Int64N(int64(slot))))
		if earliest := lastReady.Add(minUp); at.Before(earliest) {
			at = earliest
		}
		if !sleepCtx(ctx, time.Until(at)) {
			return nil
		}
		rec := killRecord{killed: time.Now()}
		d.sup.kill()
		d.setUp(false)
		d.append(rec)
		if !sleepCtx(ctx, d.downtime) {
			// The run was interrupted; leave the broker down. Main stops
			// nothing that is not running.
			return nil
		}
		rec.restarted = time.Now()
		d.update(rec)
		if err := d.sup.start(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("restart after kill %d: %w", i+1, err)
		}
		rec.ready = time.Now()
		d.update(rec)
		d.setUp(true)
		lastReady = rec.ready
	}
	return nil
}

func (d *drill) setUp(up bool) {
	d.mu.Lock()
	d.isUp = up
	d.mu.Unlock()
}

func (d *drill) append(k killRecord) {
	d.mu.Lock()
	d.log = append(d.log, k)
	d.mu.Unlock()
}

// update replaces the latest record.
func (d *drill) update(k killRecord) {
	d.mu.Lock()
	d.log[len(d.log)-1] = k
	d.mu.Unlock()
}

// history returns a copy of the kill records.
func (d *drill) history() []killRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]killRecord(nil), d.log...)
}

// status is the drill's part of the progress line.
func (d *drill) status() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	state := "up"
	if !d.isUp {
		state = "DOWN"
	}
	return "broker " + state + ", kills " + strconv.Itoa(len(d.log)) + "/" + strconv.Itoa(d.kills)
}
