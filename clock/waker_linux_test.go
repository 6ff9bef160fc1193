package clock

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRealWakerIsATimerfdOnLinux(t *testing.T) {
	wk, err := NewReal().NewWaker()
	w, ok := wk.(*fdWaker)
	if !ok || err != nil {
		t.Fatalf("Real's waker on Linux is not the timerfd one (%v)", err)
	}
	defer w.Close()
	w.Arm(10 * time.Millisecond)
	w.Arm(time.Hour)
	var cur unix.ItimerSpec
	if cerr := w.rc.Control(func(fd uintptr) { err = unix.TimerfdGettime(int(fd), &cur) }); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	// The later arming replaced the earlier in the kernel: an hour
	// left, not 10 ms.
	if left := time.Duration(cur.Value.Nano()); left < 59*time.Minute {
		t.Fatalf("after Arm(10ms) then Arm(1h) the timerfd has %v left", left)
	}
	if cur.Interval.Nano() != 0 {
		t.Fatalf("interval %v: a waker is one-shot", time.Duration(cur.Interval.Nano()))
	}
}

func TestRealWakerWakesAfterItsReaderBreaks(t *testing.T) {
	wk, _ := NewReal().NewWaker()
	w := wk.(*fdWaker)
	defer w.Close()
	// A read deadline in the past fails the reader's Read with an error
	// other than Close's: the waker must wake the waiter and go on
	// waking it, on its backup timer.
	if err := w.f.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	awaitWake(t, w, time.Now(), 10*time.Second) // the reader's last wake
	if !w.broken.Load() {
		t.Fatal("the reader failed but the waker is not marked broken")
	}
	start := time.Now()
	w.Arm(5 * time.Millisecond)
	if got := awaitWake(t, w, start, 10*time.Second); got < 5*time.Millisecond {
		t.Fatalf("woke after %v, armed for 5ms", got)
	}
}
