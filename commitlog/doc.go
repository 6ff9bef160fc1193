// Package commitlog is hourglass's append-only, checksummed,
// group-committed log: the truth from which all other state is rebuilt.
//
// # Layout
//
// A log is a directory of segment files. Each is named by the position of
// its first record in 20 decimal digits, so that a sorted listing is the log
// order:
//
//	00000000000000000000.log   records [0, 67108870)
//	00000000000067108870.log   records [67108870, 134217745)
//	00000000000134217745.log   the active segment, the only one written
//
// A segment file is a header followed by record frames, all integers little
// endian:
//
//	segment header (HeaderSize = 20 bytes)
//	+--------+---------+----------+-------------+------------+
//	| magic  | version | reserved | base        | crc32c     |
//	| "HGCL" | 1       | 3 x 0    | uint64      | of bytes   |
//	| 4      | 1       | 3        | 8           | 0..15: 4   |
//	+--------+---------+----------+-------------+------------+
//
//	record frame (FrameHeaderSize = 9 bytes + payload)
//	+------------+------------+------+-----------------+
//	| length     | crc32c     | type | payload         |
//	| uint32     | uint32     | 1    | length bytes    |
//	+------------+------------+------+-----------------+
//	length = len(payload); crc32c (Castagnoli) over type and payload.
//
// These constants, the naming scheme and the layouts above are part of the
// on-disk format and must not change without a new version byte.
//
// # Positions
//
// A Pos is a global byte offset that counts record frames only: the
// segment header does not occupy positions. The record at file offset o of
// the segment with base b is at position b + o - HeaderSize, and a segment's
// end is its successor's base, so positions run on across segments without
// gaps, Head is exactly where the next record goes, and no two records
// ever share a position. Type 0 is reserved so that zero-filled space never
// parses as a record.
//
// # Writing and group commit
//
// One writer goroutine owns the files. Append encodes and checksums its
// records on the caller's goroutine and queues them; the writer takes all
// that is queued, writes it with one WriteAt per segment touched, and under
// FlushSync issues one fdatasync for the whole batch before it publishes
// the new Head and answers every caller. Appends arriving while it writes
// and syncs wait for the next batch, so with many producers one fdatasync
// serves many of them.
//
// Under FlushAsync, Append returns after the write (the data is in the page
// cache) and a ticker syncs every FlushInterval. A process crash loses
// nothing acknowledged, but a power loss or kernel crash loses acknowledged
// records written after the last completed sync: up to one FlushInterval of
// them, plus those written while that sync ran. Their positions may then be
// reused by new records after recovery.
//
// A segment is rolled when an Append would make a non-empty segment exceed
// Options.SegmentBytes. The old segment is synced first; the new file's
// header is written and synced and its directory entry made durable
// (SyncDir) before any record is written to it. So every segment but the
// last is complete on disk, and a segment file without a valid header can
// only be the last, empty one, whose creation a crash interrupted.
//
// # Failures
//
// A failed write (for example ENOSPC on a full disk) fails the Appends of
// that batch with an error wrapping the cause and ErrDiskFull for ENOSPC.
// The segment is truncated back to the last acknowledged byte and the
// truncation synced, so no hole is left and later Appends succeed once
// space is free: a full disk refuses writes and loses nothing.
//
// A failed fsync is different, and stops the log (fail-stop). When Linux
// cannot write a dirty page back it reports the error to fsync and marks
// the page clean anyway: reads still return the new bytes, a retried fsync
// succeeds without writing them, and a power loss loses them. So after a
// failed fdatasync of a segment, or a failed fsync of the log's directory
// (at a roll, or after DeleteBefore), nothing written since the last
// successful sync can be vouched for. The log then:
//
//   - cuts the active segment back to the last successful sync (truncate,
//     then sync, best effort), so that a reopen in the same boot cannot
//     read from the page cache records the disk may not have and append
//     after a hole. Under FlushSync that removes only the failed,
//     unacknowledged batch; under FlushAsync also the records acknowledged
//     since the last sync, which a power loss could have taken anyway, and
//     Head moves back to the cut;
//   - fails the batch and every later Append and Sync with one sticky
//     error wrapping ErrFailed, ErrFsyncFailed and the cause: no length is
//     published or acknowledged past the last successful sync;
//   - must be closed and reopened: recovery re-reads what is durable.
//
// It never truncates and goes on, and never retries the fsync. ENOSPC from
// an fdatasync is such a failure (ErrDiskFull is wrapped as well), as is a
// failed sync of the cut after a failed write. A failed write that cannot
// be cut back (the truncate fails) also makes the log's error sticky, with
// ErrFailed but not ErrFsyncFailed. Callers test errors.Is(err, ErrFailed)
// before ErrDiskFull: the first means stop, the second means retry later.
//
// # Recovery
//
// Open lists the segments, removes trailing files without a valid header
// that are no longer than a header (interrupted creations), checks every
// other header and that each segment starts where its predecessor ends,
// and then reads the last segment record by record. The first record whose
// frame runs past the end of the file, whose type is 0 or whose checksum
// fails, and everything after it, is cut (Truncate, then Sync). What it did
// is in Recovery(). Torn tails are only ever in the last segment, so Open
// costs one segment's scan whatever the log's size.
//
// In the last segment a corrupt record cannot be told from a torn write, so
// it is cut with everything after it, even if the cause was media damage
// rather than a crash and acknowledged records followed it.
//
// Damage no crash can cause under this protocol is not repaired, because
// repairing it would mean dropping acknowledged records on a guess:
//
//   - a record that fails validation in a sealed (not last) segment is
//     reported by Read and Scan as ErrCorrupt when they reach it; Open
//     succeeds and the records around it stay readable;
//   - a bad header on a segment holding records, or segments that do not
//     chain, make Open fail with ErrCorrupt naming the file.
//
// # Caveats
//
// Every segment file stays open while the log is open. Read and Scan
// validate each record's checksum; Read of a position that is not a record
// boundary fails with ErrCorrupt (with overwhelming probability) rather
// than returning garbage.
package commitlog
