package queueindex

import "github.com/hourglass-mq/hourglass/vfs"

// StartWriteback starts the write-out of the entries appended since its
// last call (vfs.WritebackStarter). An owner that calls it several times
// between two Syncs spreads the index's writes over that time, so that
// Sync, which a checkpoint waits for, has only the last part to write and
// never puts a long burst on the device ahead of the commit log's fsync.
//
// It makes nothing durable and changes nothing Sync or Durable report. It
// may run alongside Append, readers and Sync. An error is a failed
// write-out that the next Sync reports too (the kernel keeps a writeback
// error for fsync; this call does not consume it).
func (x *Index) StartWriteback() error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	end := x.n.Load() * EntrySize
	if x.failed != nil || end <= x.kicked {
		return nil
	}
	from := x.kicked
	x.kicked = end
	return vfs.StartWriteback(x.f, int64(from), int64(end-from))
}
