package clock

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// NewWaker returns a Waker whose wake-ups arrive through the runtime's
// network poller, from a Linux timerfd, instead of from the runtime's
// timer heaps; if the timerfd cannot be made, one on the runtime's
// timers.
//
// Why: a runtime timer is run only by a P that enters the scheduler, and
// during a GC mark phase on a small machine every P can be held by a mark
// worker for 10 to 25 ms at a time (golang/go#45632). On 2 cores that
// held the engine's loop, and every message due meanwhile, for up to 23
// ms at a GC cycle (a runtime trace of the grouplateness scenario,
// docs/benchmarks.md, group-lateness). An idle mark worker polls the
// network between bits of work and yields once a poll readies a
// goroutine, so a timerfd's expiry reaches the loop within the poll; a
// fractional worker (GOMAXPROCS 2 has those, not dedicated ones) stops
// only at its time quota or when preempted, and sysmon polls the network
// at least every 10 ms besides. Against an expired runtime timer neither
// helps.
func (r *Real) NewWaker() (Waker, error) {
	w, err := newFDWaker()
	if err != nil {
		return newTimerWaker(make(chan struct{}, 1)), fmt.Errorf("timerfd: %w; waking on the runtime's timers, which a GC mark phase can delay", err)
	}
	return w, nil
}

// fdWaker is a Waker on a timerfd read by one goroutine.
type fdWaker struct {
	f  *os.File
	rc syscall.RawConn // arms the fd only while it is open (never a reused number)
	c  chan struct{}
	// done is closed when read returns: Close waits for it, so that no
	// reader outlives its waker.
	done chan struct{}
	// broken is set when the timerfd fails other than by Close (never
	// seen): Arm then arms backup, a runtime timer, rather than leave
	// the waiter without wake-ups.
	broken atomic.Bool
	backup *timerWaker
}

func newFDWaker() (*fdWaker, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// Non-blocking, so os.NewFile registers it with the poller: a Read
	// parks the goroutine instead of holding a thread.
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &fdWaker{f: f, rc: rc, c: make(chan struct{}, 1), done: make(chan struct{})}
	w.backup = newTimerWaker(w.c)
	go w.read()
	return w, nil
}

// read forwards each expiry to c until the file is closed.
func (w *fdWaker) read() {
	defer close(w.done)
	var buf [8]byte // the count of expiries since the last read
	for {
		if _, err := w.f.Read(buf[:]); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.broken.Store(true)
				wake(w.c) // the waiter arms again, on backup
			}
			return
		}
		wake(w.c)
	}
}

func (w *fdWaker) Arm(d time.Duration) {
	if w.broken.Load() {
		w.backup.Arm(d)
		return
	}
	drain(w.c)
	// A zero it_value disarms a timerfd: at least 1 ns.
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(d.Nanoseconds(), 1))}
	var err error
	if cerr := w.rc.Control(func(fd uintptr) { err = unix.TimerfdSettime(int(fd), 0, &spec, nil) }); cerr != nil || err != nil {
		wake(w.c) // cannot arm (closed): wake at once rather than never
		return
	}
	if w.broken.Load() {
		// The reader broke after the check above, and drain may have
		// taken the wake it sent: no one reads the timerfd any more.
		// (read sets broken before it wakes, so this check or the
		// waiter's C sees it.)
		w.backup.Arm(d)
	}
}

func (w *fdWaker) C() <-chan struct{} { return w.c }

// Close closes the timerfd, which ends the reader's Read, and waits for
// the reader to return.
func (w *fdWaker) Close() {
	w.f.Close()
	<-w.done
	w.backup.Close()
}
