package main

import (
	"fmt"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

// runOpen opens an existing directory once, as it is (after kill -9 it
// holds the log written since the last checkpoint), and reports how long
// engine.Open took, in wall time and in the process's CPU time: on a
// shared machine the wall time mostly measures the other work, the CPU
// time what recovery itself did. The Close after it writes a checkpoint,
// so each measurement opens a fresh copy of the directory.
func runOpen(c config, dir string) (*report, error) {
	r := newReport("open", dir)
	if err := dropCaches(c); err != nil {
		return r, err
	}
	cpu0 := cpuTime()
	t0 := time.Now()
	e, err := engine.Open(engineOptions(dir))
	if err != nil {
		return r, err
	}
	took, cpu := time.Since(t0), cpuTime()-cpu0
	// The forecast's count of the checkpoint's timers, which also checks
	// the timer runs whole, runs after Open returns; a forecast waits for
	// it.
	if _, err := e.Forecast("", e.Now(), e.Now()+60_000, time.Minute); err != nil {
		e.Close()
		return r, err
	}
	counted := time.Since(t0)
	st := e.Stats()
	r.fig("Open: wall, CPU (user+system)", fmt.Sprintf("%s, %s", secs(took), secs(cpu)))
	r.fig("forecast ready (the count after Open done), from the call to Open", secs(counted))
	r.fig("log replayed (written since the last checkpoint)", fmt.Sprintf("%s records, %s", humanInt(int64(st.Replayed.Load())), mib(int64(st.ReplayedBytes.Load()))))
	r.fig("pending messages", humanInt(st.Pending.Load()))
	if c.dropCaches {
		r.note("cold: sync and `echo 3 > /proc/sys/vm/drop_caches` before the Open")
	}
	return r, e.Close()
}

// cpuTime returns the CPU time the process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
