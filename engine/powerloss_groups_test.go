package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Power loss under consumer groups: a run sends, receives, acks, nacks,
// changes leases, lets leases expire into dead letters and redrives them,
// with an image of the disk taken at every step that changes it. Each image
// is recovered and drained by a consumer that nacks everything until it is
// dead-lettered. Then:
//   - no message whose ack was acknowledged is handed out again (leases are
//     the documented redelivery window, acks are not);
//   - a redelivery's attempt is above every attempt handed out before the
//     power loss (attempts never go down);
//   - every acknowledged send ends acked or in the dead-letter topic, and
//     no message is in the dead-letter topic twice;
//   - every copy a finished redrive made is still in the topic.

const (
	pgTopic = "pg"
	pgGroup = "w"
)

// pgLedger is what a group run's clients were told.
type pgLedger struct {
	sent     []message.ID
	acked    map[message.ID]bool // Ack returned success
	ackDoubt map[message.ID]bool // Ack in flight when the image was taken
	attempt  map[message.ID]int  // highest attempt a finished Receive returned
	redriven map[string]bool     // IDs of dead letters whose finished redrive copied them
}

func (l *pgLedger) clone() pgLedger {
	return pgLedger{sent: l.sent[:len(l.sent):len(l.sent)], acked: maps.Clone(l.acked), ackDoubt: maps.Clone(l.ackDoubt),
		attempt: maps.Clone(l.attempt), redriven: maps.Clone(l.redriven)}
}

type pgState struct {
	n     int
	image *vfs.Mem
	at    time.Time
	l     pgLedger
}

func pgOptions(fs vfs.FS, clk clock.Clock) Options {
	o := plOptions(fs, clk)
	o.Retention = time.Hour // the drain must find every message
	return o
}

var pgConfig = GroupConfig{MaxAttempts: 3, BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond}

type pgRun struct {
	t      *testing.T
	rng    *rand.Rand
	clk    *clock.Fake
	mem    *vfs.Mem
	e      *Engine
	states []pgState
	seq    int
	out    []Received // leased to this client, not yet acked or nacked

	mu sync.Mutex // guards l and states
	l  pgLedger
}

func (r *pgRun) capture(durable bool) {
	// Hooks run on engine goroutines, several at once (the bucket sync
	// job has workers): mu serialises them.
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.l.clone()
	at := r.clk.Now()
	n := len(r.states)
	if durable {
		r.states = append(r.states, pgState{n: n, image: r.mem.Crash(nil), at: at, l: l})
	}
	r.states = append(r.states, pgState{n: n + 1, image: r.mem.Crash(rand.New(rand.NewPCG(uint64(n), 7))), at: at, l: l})
}

func (r *pgRun) step() {
	ctx := context.Background()
	switch p := r.rng.IntN(100); {
	case p < 25:
		r.seq++
		rc, err := r.e.Send(ctx, message.Message{Topic: pgTopic, Body: []byte(fmt.Sprintf("g%d", r.seq))},
			message.When{Delay: time.Duration(r.rng.IntN(800)) * time.Millisecond})
		if err != nil {
			r.t.Fatalf("send: %v", err)
		}
		r.mu.Lock()
		r.l.sent = append(r.l.sent, rc.ID)
		r.mu.Unlock()
	case p < 45:
		rs, err := r.e.Receive(ctx, ReceiveRequest{Topic: pgTopic, Group: pgGroup, Max: 3, Invisible: 300 * time.Millisecond})
		if err != nil {
			r.t.Fatalf("receive: %v", err)
		}
		r.mu.Lock()
		for _, x := range rs {
			r.l.attempt[x.ID] = max(r.l.attempt[x.ID], x.Attempt)
		}
		r.mu.Unlock()
		r.out = append(r.out, rs...)
	case p < 65 && len(r.out) > 0:
		i := r.rng.IntN(len(r.out))
		x := r.out[i]
		r.out = append(r.out[:i], r.out[i+1:]...)
		r.mu.Lock()
		r.l.ackDoubt[x.ID] = true
		r.mu.Unlock()
		err := r.e.Ack(ctx, pgTopic, pgGroup, x.Receipt)
		r.mu.Lock()
		delete(r.l.ackDoubt, x.ID)
		if err == nil {
			r.l.acked[x.ID] = true
		}
		r.mu.Unlock()
	case p < 72 && len(r.out) > 0:
		i := r.rng.IntN(len(r.out))
		x := r.out[i]
		r.out = append(r.out[:i], r.out[i+1:]...)
		_ = r.e.Nack(ctx, pgTopic, pgGroup, x.Receipt, 0) // a lease that ended meanwhile: not found
	case p < 78 && len(r.out) > 0:
		_ = r.e.ChangeInvisibility(ctx, pgTopic, pgGroup, r.out[r.rng.IntN(len(r.out))].Receipt, time.Duration(1+r.rng.IntN(600))*time.Millisecond)
	case p < 85:
		if err := r.e.checkpoint(); err != nil {
			r.t.Fatalf("checkpoint: %v", err)
		}
	case p < 89:
		r.redrive()
	default:
		waitParked(r.e, r.clk)
		r.clk.Advance(time.Duration(r.rng.IntN(600)) * time.Millisecond)
		if !waitSettled(r.e, r.now(), 5*time.Second) {
			r.t.Fatalf("engine did not settle: %s", engineState(r.e))
		}
	}
}

func (r *pgRun) now() int64 { return r.clk.Now().UnixMilli() }

// redrive redrives dead letters and records the copies it made.
func (r *pgRun) redrive() {
	n, err := r.e.Redrive(context.Background(), pgTopic, pgGroup, 2)
	if err != nil {
		r.t.Fatalf("redrive: %v", err)
	}
	if n == 0 {
		return
	}
	vs, err := readAllVisible(r.e)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	for _, v := range vs {
		if from := v.Message.Properties["hourglass-redriven-from"]; v.topic == pgTopic && from != "" {
			r.l.redriven[from] = true
		}
	}
	r.mu.Unlock()
}

// verifyPG recovers a group image, drains the group and checks it.
func verifyPG(st pgState) error {
	clk := clock.NewFake(st.at)
	e, err := Open(pgOptions(st.image, clk))
	if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	defer e.Close()
	// An image taken before the topic and group were durable holds
	// neither (and no send); the drain needs both.
	if err := e.CreateTopic(pgTopic, TopicConfig{Queues: 2}); err != nil && !errors.Is(err, errs.ErrAlreadyExists) {
		return fmt.Errorf("create topic after recovery: %w", err)
	}
	if err := e.CreateGroup(pgTopic, pgGroup, pgConfig); err != nil && !errors.Is(err, errs.ErrAlreadyExists) {
		return fmt.Errorf("create group after recovery: %w", err)
	}
	bad := &pgProblems{}
	if err := drainPG(e, clk, st, bad); err != nil {
		return err
	}
	if err := waitDeadLettersMoved(e); err != nil {
		return err
	}
	if err := checkPGOutcome(e, st, bad); err != nil {
		return err
	}
	if len(bad.problems) > 0 {
		return fmt.Errorf("%v", bad.problems)
	}
	return nil
}

// pgProblems collects the first 6 problems verifyPG finds.
type pgProblems struct{ problems []string }

// add notes a problem, unless 6 are noted already.
func (p *pgProblems) add(format string, args ...any) {
	if len(p.problems) < 6 {
		p.problems = append(p.problems, fmt.Sprintf(format, args...))
	}
}

// drainPG receives and nacks the group's messages, advancing the clock
// 300 ms a round, until four rounds in a row receive nothing (at most 40
// rounds). Nothing whose ack was acknowledged may come back, and every
// attempt number must exceed the last one handed out before the crash.
func drainPG(e *Engine, clk *clock.Fake, st pgState, bad *pgProblems) error {
	ctx := context.Background()
	idle := 0
	for round := 0; round < 40 && idle < 4; round++ {
		waitParked(e, clk)
		clk.Advance(300 * time.Millisecond)
		if !waitSettled(e, clk.Now().UnixMilli(), 5*time.Second) || !waitAdvanced(e, clk.Now().UnixMilli()) {
			return fmt.Errorf("engine did not settle: %s", engineState(e))
		}
		rs, err := e.Receive(ctx, ReceiveRequest{Topic: pgTopic, Group: pgGroup, Max: MaxReceive, Invisible: time.Minute})
		if err != nil {
			return fmt.Errorf("receive after recovery: %w", err)
		}
		if len(rs) == 0 {
			idle++
			continue
		}
		idle = 0
		for _, x := range rs {
			if st.l.acked[x.ID] {
				bad.add("%v handed out again (attempt %d) after its ack was acknowledged", x.ID, x.Attempt)
			}
			if a := st.l.attempt[x.ID]; x.Attempt <= a {
				bad.add("%v handed out with attempt %d after attempt %d was handed out", x.ID, x.Attempt, a)
			}
			if err := e.Nack(ctx, pgTopic, pgGroup, x.Receipt, 0); err != nil {
				return fmt.Errorf("nack after recovery: %w", err)
			}
		}
	}
	if idle < 4 {
		return fmt.Errorf("the group did not drain")
	}
	return nil
}

// waitDeadLettersMoved waits until the loop moved every dead letter.
func waitDeadLettersMoved(e *Engine) error {
	// Dead letters move in the loop; wait until none is waiting.
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		n := e.cons.deadLettersWaiting()
		e.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d dead letters never moved", n)
		}
		e.life.kickLoop()
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// checkPGOutcome checks what is visible after the drain: each message
// sent is acked (or in doubt) or dead-lettered once, never both, and each
// redriven copy is still there.
func checkPGOutcome(e *Engine, st pgState, bad *pgProblems) error {
	vs, err := readAllVisible(e)
	if err != nil {
		return err
	}
	dead := map[string]int{}
	copies := map[string]bool{}
	for _, v := range vs {
		switch v.topic {
		case DeadLetterTopic(pgTopic, pgGroup):
			origin := v.Message.Properties["hourglass-origin-id"]
			if dead[origin]++; dead[origin] == 2 {
				bad.add("%s is in the dead-letter topic twice", origin)
			}
		case pgTopic:
			if from := v.Message.Properties["hourglass-redriven-from"]; from != "" {
				copies[from] = true
			}
		}
	}
	for _, id := range st.l.sent {
		if !st.l.acked[id] && !st.l.ackDoubt[id] && dead[id.String()] == 0 {
			bad.add("%v was neither acked nor dead-lettered", id)
		}
		if st.l.acked[id] && dead[id.String()] > 0 {
			bad.add("%v was acked and dead-lettered", id)
		}
	}
	for from := range st.l.redriven {
		if !copies[from] {
			bad.add("the redriven copy of %s is gone", from)
		}
	}
	return nil
}

func TestPowerLossGroups(t *testing.T) {
	var total, failed int
	for run := 0; run < 2*plScale(t); run++ {
		r := &pgRun{t: t, rng: rand.New(rand.NewPCG(uint64(run), 0x6709)), clk: clock.NewFake(t0), mem: vfs.NewMem(),
			l: pgLedger{acked: map[message.ID]bool{}, ackDoubt: map[message.ID]bool{}, attempt: map[message.ID]int{}, redriven: map[string]bool{}}}
		e, err := Open(pgOptions(&crashFS{mem: r.mem, hook: r.capture}, r.clk))
		if err != nil {
			t.Fatal(err)
		}
		r.e = e
		if err := e.CreateTopic(pgTopic, TopicConfig{Queues: 2}); err != nil {
			t.Fatal(err)
		}
		if err := e.CreateGroup(pgTopic, pgGroup, pgConfig); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 70; i++ {
			r.step()
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		// Every image of the run: a worker pool keeps this within seconds.
		var wg sync.WaitGroup
		var mu sync.Mutex
		next := 0
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					if next == len(r.states) {
						mu.Unlock()
						return
					}
					st := r.states[next]
					next++
					mu.Unlock()
					if err := verifyPG(st); err != nil {
						mu.Lock()
						if failed++; failed <= 10 {
							t.Errorf("run %d state %d: %v", run, st.n, err)
						}
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		total += len(r.states)
	}
	t.Logf("consumer groups: %d crash states recovered, drained and checked, %d failing", total, failed)
	if total < 100 {
		t.Errorf("only %d crash states", total)
	}
}

// waitAdvanced waits until the loop advanced its wheel to t, so that the
// lease and retry timers due by t have run (settled looks at messages only).
func waitAdvanced(e *Engine, t int64) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		done := e.disp.leaseWheelTime() >= t
		e.mu.Unlock()
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		e.life.kickLoop()
		time.Sleep(100 * time.Microsecond)
	}
}
