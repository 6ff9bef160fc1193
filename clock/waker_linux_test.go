package clock

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRealWakerIsATimerfdOnLinux(t *testing.T) {
	w, ok := NewReal().NewWaker().(*fdWaker)
	if !ok {
		t.Fatal("Real's waker on Linux is not the timerfd one")
	}
	defer w.Close()
	w.Arm(10 * time.Millisecond)
	w.Arm(time.Hour)
	var cur unix.ItimerSpec
	var err error
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
