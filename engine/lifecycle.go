package engine

import (
	"io"
	"log/slog"
	"sync"

	"github.com/hourglass-mq/hourglass/errs"
)

// lifecycle is the engine's run state. closed, failed and visibleCh are
// guarded by Engine.mu; the channels are made once at Open. Its fields
// are its own (ownership_test.go). It calls no other part: the engine
// and the parts ask it, and it holds only what a failure reaches.
type lifecycle struct {
	mu        *sync.Mutex  // the engine's lock, which guards closed, failed and visibleCh
	stats     *Stats       // where a failure shows (Stats.Failed)
	logger    *slog.Logger // where a failure is logged
	closed    bool
	failed    error         // the fatal storage failure, if any (see fail.go)
	failedCh  chan struct{} // closed when failed is set
	visibleCh chan struct{} // closed and replaced when messages become visible
	kick      chan struct{} // wakes the dispatch loop
	ckptNow   chan struct{} // asks the checkpointer to run now
	done      chan struct{} // closed by Close
	loopDone  chan struct{}
	ckptDone  chan struct{}
	scrubDone chan struct{} // closed when the scrubber ends (at once if it is off)
	lock      io.Closer     // the data directory's lock, released by Close
}

func newLifecycle(mu *sync.Mutex, stats *Stats, logger *slog.Logger) *lifecycle {
	return &lifecycle{
		mu:        mu,
		stats:     stats,
		logger:    logger,
		visibleCh: make(chan struct{}),
		kick:      make(chan struct{}, 1),
		ckptNow:   make(chan struct{}, 1),
		failedCh:  make(chan struct{}),
		done:      make(chan struct{}),
		loopDone:  make(chan struct{}),
		ckptDone:  make(chan struct{}),
		scrubDone: make(chan struct{}),
	}
}

// setLock keeps the data directory's lock until releaseLock.
func (l *lifecycle) setLock(lock io.Closer) { l.lock = lock }

// releaseLock releases the data directory's lock: the last step of Close.
func (l *lifecycle) releaseLock() { l.lock.Close() }

// closeLocked marks the engine closing; false if it was already.
func (l *lifecycle) closeLocked() bool {
	if l.closed {
		return false
	}
	l.closed = true
	return true
}

// closedLocked reports whether Close has begun.
func (l *lifecycle) closedLocked() bool { return l.closed }

// stopAndWait tells the loop, the checkpointer and the scrubber to stop,
// and waits for each to end. Not under mu.
func (l *lifecycle) stopAndWait() {
	close(l.done)
	<-l.loopDone
	<-l.ckptDone
	<-l.scrubDone
}

// stopping is closed when Close begins.
func (l *lifecycle) stopping() <-chan struct{} { return l.done }

// loopExited and checkpointerExited are called once, as the dispatch loop
// and the checkpointer end.
func (l *lifecycle) loopExited()         { close(l.loopDone) }
func (l *lifecycle) checkpointerExited() { close(l.ckptDone) }

// scrubberExited is called once, as the scrubber ends or, when scrubbing
// is off, at the start instead of it.
func (l *lifecycle) scrubberExited() { close(l.scrubDone) }

// setFailedLocked records the first fatal storage failure; false if one
// was recorded already.
func (l *lifecycle) setFailedLocked(err error) bool {
	if l.failed != nil {
		return false
	}
	l.failed = err
	close(l.failedCh)
	return true
}

// failureLocked is the fatal storage failure, or nil.
func (l *lifecycle) failureLocked() error { return l.failed }

// failedSignal is closed when a fatal failure is recorded.
func (l *lifecycle) failedSignal() <-chan struct{} { return l.failedCh }

// failedErrLocked is what operations return after a fatal failure.
func (l *lifecycle) failedErrLocked() error {
	return errs.Wrap(errs.Unavailable, l.failed, "the broker stopped after a storage failure; restart it to recover from the commit log")
}

// unavailableLocked is the error an operation fails with once the engine
// failed or is closing, or nil.
func (l *lifecycle) unavailableLocked() error {
	if l.failed != nil {
		return l.failedErrLocked()
	}
	if l.closed {
		return errs.New(errs.Unavailable, "broker is shutting down")
	}
	return nil
}

// available is unavailableLocked for a caller that does not hold mu.
func (l *lifecycle) available() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unavailableLocked()
}

// kickLoop wakes the dispatch loop without blocking.
func (l *lifecycle) kickLoop() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// kicked receives when the dispatch loop is woken (kickLoop).
func (l *lifecycle) kicked() <-chan struct{} { return l.kick }

// askCheckpoint asks the checkpointer to run now, without blocking.
func (l *lifecycle) askCheckpoint() {
	select {
	case l.ckptNow <- struct{}{}:
	default:
	}
}

// checkpointAsked receives when a checkpoint is asked for.
func (l *lifecycle) checkpointAsked() <-chan struct{} { return l.ckptNow }

// notifyVisibleLocked wakes every waiter of visibleLocked's channel.
func (l *lifecycle) notifyVisibleLocked() {
	close(l.visibleCh)
	l.visibleCh = make(chan struct{})
}

// visibleLocked returns a channel that is closed the next time messages
// become visible.
func (l *lifecycle) visibleLocked() <-chan struct{} { return l.visibleCh }

// startBackground starts the engine's goroutines once recovery is done:
// the dispatch loop, the checkpointer and, unless it is nil (scrubbing is
// off), the scrubber. Close stops them (done) and waits for each. The
// engine gives the goroutines' bodies: the lifecycle calls no other part.
func (l *lifecycle) startBackground(loop, checkpointer, scrubber func()) {
	go loop()
	go checkpointer()
	if scrubber != nil {
		go scrubber()
	} else {
		l.scrubberExited()
	}
}
