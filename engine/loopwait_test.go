package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
)

// fallbackClock is the system clock whose waker is the fallback one, as
// when no timerfd can be made.
type fallbackClock struct{ *clock.Real }

func (fallbackClock) NewWaker() (clock.Waker, error) {
	w, _ := clock.NewReal().NewWaker()
	return w, errors.New("timerfd: too many open files")
}

func TestLoopWaitSaysWhenItsWakerFellBack(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	c := fallbackClock{clock.NewReal()}
	w := newLoopWait(c, newLifecycle(&sync.Mutex{}, &Stats{}, log), log)
	defer w.close()
	if !strings.Contains(out.String(), "too many open files") {
		t.Fatalf("no warning of the fallback in the log: %q", out.String())
	}
	// It still sleeps on the waker, and wakes.
	start := time.Now()
	if !w.sleep(5*time.Millisecond, c.Since()) {
		t.Fatal("sleep reported a stop")
	}
	if d := time.Since(start); d < 5*time.Millisecond {
		t.Fatalf("woke after %v, asked to sleep 5ms", d)
	}
}
