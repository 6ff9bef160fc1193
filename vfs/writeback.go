package vfs

// WritebackStarter is an optional feature of a File: starting the
// write-out of a range of its dirty pages without waiting for it and
// without making anything durable. A writer that starts the writeback of
// what it wrote every few hundred KiB (PaceBytes) leaves its final Sync
// little to write, so the device never sees one long burst from it; a
// burst queues ahead of every other fsync on the device, and on ext4 a
// journal commit that another file's fsync needs may wait for it too.
//
// It is a hint and nothing more: durability still comes only from Sync
// (and SyncDir for directory entries). Mem and Faulty do not implement it,
// which is exactly as durable.
type WritebackStarter interface {
	StartWriteback(off, n int64) error
}

// WriteOuter is an optional feature of a File: writing a range's dirty
// pages out and waiting until the device has them, without making anything
// durable (no metadata, no cache flush). WritePaced uses it to keep at
// most one step of a large write in the device's queue at a time, so that
// another file's fsync waits behind a step, not behind megabytes.
type WriteOuter interface {
	WriteOut(off, n int64) error
}

// WriteOut writes bytes [off, off+n) of f out and waits for them when f
// is a WriteOuter, starts their write-out when it is only a
// WritebackStarter, and does nothing otherwise. An error of the write-out
// is returned here, and the kernel then no longer reports it to the next
// fsync of the file: the caller must treat it as that fsync's failure.
func WriteOut(f File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	if w, ok := f.(WriteOuter); ok {
		return w.WriteOut(off, n)
	}
	return StartWriteback(f, off, n)
}

// PaceBytes is how much a paced writer writes between two calls of
// StartWriteback: small enough that the write-out of one step takes the
// device well under a millisecond, large enough that the calls are few.
const PaceBytes = 256 << 10

// StartWriteback starts the write-out of bytes [off, off+n) of f when f is
// a WritebackStarter, and does nothing otherwise.
func StartWriteback(f File, off, n int64) error {
	if w, ok := f.(WritebackStarter); ok && n > 0 {
		return w.StartWriteback(off, n)
	}
	return nil
}

// WritePaced writes data at off of f in PaceBytes steps, writing each
// whole step out as soon as it is written and waiting for it (WriteOuter;
// a file that only starts its writeback, WritebackStarter, starts it).
// With the steps only started, a run of several MiB could be queued on
// the device at once, ahead of the commit log's fdatasync; waited for, at
// most one step is (docs/benchmarks.md, issue 8 ninth pass). A last step shorter than PaceBytes, and so a write
// shorter than that, is left to the caller's Sync: thousands of tiny
// write-outs cost the device more than one sync of the same pages. The
// caller still syncs f to make data durable.
func WritePaced(f File, data []byte, off int64) error {
	for len(data) > 0 {
		n := min(len(data), PaceBytes)
		if _, err := f.WriteAt(data[:n], off); err != nil {
			return err
		}
		if n == PaceBytes {
			if err := WriteOut(f, off, int64(n)); err != nil {
				return err
			}
		}
		data, off = data[n:], off+int64(n)
	}
	return nil
}
