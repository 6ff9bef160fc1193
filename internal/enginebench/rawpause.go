package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The rawpause scenario is the pause scenario's independent baseline: what
// this disk gives a plain group-commit loop (no engine) at the same load,
// alone and while a second writer writes and makes durable files of a
// checkpoint's size once a second, in each of the ways a checkpoint could.
// It tells whether the pause target (Send p99.9 under 10 ms) is reachable
// here at all, and which way of writing a checkpoint disturbs the log's
// fdatasync least.

// rawRecord is the size of one raw record: about what the engine's log
// takes per keyed 16 B message of the pause scenario (a send record).
const rawRecord = 64

// Ways the checkpoint-like writer makes its files durable.
const (
	ckNone   = "none"   // no writer: the loop alone
	ckFsync  = "fsync"  // write each file whole, then fdatasync each
	ckSyncfs = "syncfs" // write them all, then one syncfs(2)
	ckPaced  = "paced"  // sync_file_range(WRITE) every paceBytes, then fdatasync each
	// ckPacedSyncfs kicks writeback as ckPaced does, then makes the files
	// durable with one syncfs(2).
	ckPacedSyncfs = "paced+syncfs"
)

// syncWorkers is how many fdatasyncs of a round's files run at once: on
// ext4 concurrent fdatasyncs share journal commits.
const syncWorkers = 64

// paceBytes is how much the paced writer writes before it starts the
// writeback of what it wrote.
const paceBytes = 256 << 10

// runRawPause runs the raw group-commit loop at -rate calls a second from
// -producers goroutines for -window: first once per committer count with
// no other writer (the loop tuned to its best p99.9), then with that count
// against each way of writing -ckpt-bytes in -ckpt-files files a second.
func runRawPause(c config, dir string) (*report, error) {
	r := newReport("rawpause", dir)
	r.note("load: %d goroutines together append %s records/s of %d B to one file for %v; each waits until a committer has written its record (with all others queued: one WriteAt) and called fdatasync; no engine",
		c.producers, humanInt(int64(c.rate)), rawRecord, c.window)
	r.note("checkpoint-like writer: every 1 s it creates %d files holding %s bytes in all (64 KiB writes), makes them durable the named way (fdatasyncs %d at a time), fsyncs their directory and removes the previous round's files",
		c.ckptFiles, humanInt(int64(c.ckptBytes)), syncWorkers)
	best, bestQ := 0, quantiles{}
	for _, k := range []int{1, 2, 4} {
		sends, _, err := rawPauseOnce(c, dir, k, ckNone)
		if err != nil {
			return r, err
		}
		q := summarize(latencies(sends))
		r.fig(fmt.Sprintf("loop alone, %d committer(s): p50 / p99 / p99.9 / max", k), q.nsAsMs())
		if best == 0 || q.p999 < bestQ.p999 {
			best, bestQ = k, q
		}
	}
	r.note("the committer count with the best p99.9 alone (%d) is used against the writer", best)
	for _, mode := range c.ckptModes {
		sends, rounds, err := rawPauseOnce(c, dir, best, mode)
		if err != nil {
			return r, err
		}
		q := summarize(latencies(sends))
		r.cmp(fmt.Sprintf("with the writer, %s: p50 / p99 / p99.9 / max", mode), q.nsAsMs(), bestQ.nsAsMs()+" (alone)",
			float64(q.p999)/float64(max(bestQ.p999, 1)), "p99.9 under 10 ms")
		var during []int64
		for _, s := range sends {
			if overlaps(s, rounds) {
				during = append(during, int64(s.took))
			}
		}
		took := make([]float64, len(rounds))
		for i, rd := range rounds {
			took[i] = rd.took * 1000
		}
		if len(took) > 0 {
			r.fig(fmt.Sprintf("with the writer, %s: calls that overlapped a round (%s) p50 / p99 / p99.9 / max; round duration median (range)", mode, humanInt(int64(len(during)))),
				fmt.Sprintf("%s; %.0f ms (%.0f to %.0f)", summarize(during).nsAsMs(), median(took), slices.Min(took), slices.Max(took)))
		}
	}
	return r, nil
}

// latencies returns the durations of sends in ns.
func latencies(sends []pauseSend) []int64 {
	out := make([]int64, len(sends))
	for i, s := range sends {
		out[i] = int64(s.took)
	}
	return out
}

// rawPauseOnce runs one window of the raw loop with k committers and the
// writer in the given mode; it returns the calls and the writer's rounds.
func rawPauseOnce(c config, dir string, k int, mode string) ([]pauseSend, []checkpointEvent, error) {
	l, err := openRawLog(dir, k)
	if err != nil {
		return nil, nil, err
	}
	defer l.close()
	stop := make(chan struct{})
	var rounds []checkpointEvent
	werr := make(chan error, 1)
	go func() {
		if mode == ckNone {
			werr <- nil
			return
		}
		var err error
		rounds, err = ckptWriter(c, filepath.Join(dir, "ckpt"), mode, stop)
		werr <- err
	}()
	rec := make([]byte, rawRecord)
	sends, err := pacedCalls(c, func(int, int) error { return l.append(rec) })
	close(stop)
	if e := <-werr; err == nil {
		err = e
	}
	return sends, rounds, err
}

// rawLog is a plain group-commit log: appenders queue their record and a
// waiter; each of k committers takes everything queued, writes it with one
// WriteAt and calls fdatasync, then answers its waiters. With k > 1 a batch
// is written while the previous one's fdatasync runs.
type rawLog struct {
	f    *os.File
	mu   sync.Mutex
	buf  []byte
	wait []chan error
	off  int64
	done bool
	cond *sync.Cond
	wg   sync.WaitGroup
}

func openRawLog(dir string, k int) (*rawLog, error) {
	f, err := os.CreateTemp(dir, "rawpause-*.log")
	if err != nil {
		return nil, err
	}
	l := &rawLog{f: f}
	l.cond = sync.NewCond(&l.mu)
	for range k {
		l.wg.Add(1)
		go l.commit()
	}
	return l, nil
}

// append queues rec and waits until it is durable.
func (l *rawLog) append(rec []byte) error {
	ch := make(chan error, 1)
	l.mu.Lock()
	l.buf = append(l.buf, rec...)
	l.wait = append(l.wait, ch)
	l.cond.Signal()
	l.mu.Unlock()
	return <-ch
}

func (l *rawLog) commit() {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		for len(l.wait) == 0 && !l.done {
			l.cond.Wait()
		}
		if len(l.wait) == 0 {
			l.mu.Unlock()
			return
		}
		buf, wait, at := l.buf, l.wait, l.off
		l.buf, l.wait, l.off = nil, nil, l.off+int64(len(buf))
		l.mu.Unlock()
		_, err := l.f.WriteAt(buf, at)
		if err == nil {
			err = unix.Fdatasync(int(l.f.Fd()))
		}
		for _, ch := range wait {
			ch <- err
		}
	}
}

func (l *rawLog) close() {
	l.mu.Lock()
	l.done = true
	l.cond.Broadcast()
	l.mu.Unlock()
	l.wg.Wait()
	l.f.Close()
	os.Remove(l.f.Name())
}

// ckptWriter writes a round of checkpoint-like files every second until
// stop is closed, and returns when each round ended and how long it took.
func ckptWriter(c config, dir string, mode string, stop <-chan struct{}) ([]checkpointEvent, error) {
	defer os.RemoveAll(dir)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var out []checkpointEvent
	var prev []string
	for n := 0; ; n++ {
		select {
		case <-stop:
			return out, nil
		case <-t.C:
		}
		sub := filepath.Join(dir, fmt.Sprint(n))
		start := time.Now()
		if err := ckptRound(sub, c.ckptFiles, c.ckptBytes, mode); err != nil {
			return out, err
		}
		out = append(out, checkpointEvent{end: time.Now(), took: time.Since(start).Seconds()})
		for _, p := range prev {
			os.RemoveAll(p)
		}
		prev = []string{sub}
	}
}

// ckptRound creates files files of bytes/files bytes each in the new
// directory sub and makes them and sub durable as mode says.
func ckptRound(sub string, files, bytes int, mode string) error {
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	per := bytes / max(files, 1)
	var fs []*os.File
	defer func() {
		for _, f := range fs {
			f.Close()
		}
	}()
	for i := range files {
		f, err := os.Create(filepath.Join(sub, fmt.Sprint(i)))
		if err != nil {
			return err
		}
		fs = append(fs, f)
		paced := mode == ckPaced || mode == ckPacedSyncfs
		kicked := 0
		for off := 0; off < per; off += len(chunk) {
			n := min(len(chunk), per-off)
			if _, err := f.WriteAt(chunk[:n], int64(off)); err != nil {
				return err
			}
			if end := off + n; paced && (end-kicked >= paceBytes || end == per) {
				if err := unix.SyncFileRange(int(f.Fd()), int64(kicked), int64(end-kicked), unix.SYNC_FILE_RANGE_WRITE); err != nil {
					return err
				}
				kicked = end
			}
		}
		if mode == ckSyncfs || mode == ckPacedSyncfs {
			// A batch sync needs no handle: close at once, as the
			// engine's bucket writes do, so that tens of thousands of
			// files stay within the open-file limit.
			fs = fs[:len(fs)-1]
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
	return syncRound(sub, fs, mode)
}

// syncRound makes the round's files and directory durable.
func syncRound(sub string, fs []*os.File, mode string) error {
	if mode == ckSyncfs || mode == ckPacedSyncfs {
		d, err := os.Open(sub)
		if err != nil {
			return err
		}
		defer d.Close()
		return unix.Syncfs(int(d.Fd()))
	}
	next := make(chan *os.File)
	errc := make(chan error, syncWorkers)
	for range syncWorkers {
		go func() {
			var first error
			for f := range next {
				if err := unix.Fdatasync(int(f.Fd())); err != nil && first == nil {
					first = err
				}
			}
			errc <- first
		}()
	}
	for _, f := range fs {
		next <- f
	}
	close(next)
	var first error
	for range syncWorkers {
		first = cmpErr(first, <-errc)
	}
	if first != nil {
		return first
	}
	d, err := os.Open(sub)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
