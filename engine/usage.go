package engine

import "github.com/hourglass-mq/hourglass/queueindex"

// DiskBytes is what the data directory holds, by part, as the engine
// counts it (record bytes, not allocated blocks; the key index and the
// overlay journal are not counted).
type DiskBytes struct {
	// Log is the commit log's retained bytes.
	Log int64
	// Timers is the timer buckets' entries, written and buffered.
	Timers int64
	// Queues is the queue indexes' entries.
	Queues int64
}

// DiskUsage returns the data directory's size by part.
func (e *Engine) DiskUsage() DiskBytes {
	var d DiskBytes
	for _, s := range e.clog.Segments() {
		d.Log += int64(s.End - s.Base)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, d.Timers = e.disp.store().Buckets()
	for t := range e.cat.topicsLocked() {
		for _, q := range t.queues {
			d.Queues += int64(q.Len()) * queueindex.EntrySize
		}
	}
	return d
}
