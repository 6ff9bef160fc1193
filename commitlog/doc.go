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
// Two types are reserved. Type 0 never comes from Append, so zero-filled
// space never parses as a record. TypeSkip (0xFE) marks a skip frame,
// written only by Repair over a quarantined damaged range:
//
//	skip frame (exactly the length of the range it covers, >= 9 bytes)
//	+------------+------------+------+-----------------------------+
//	| length     | crc32c     | 0xFE | length zero bytes           |
//	+------------+------------+------+-----------------------------+
//
// Its zero payload keeps any position inside it from framing a record
// (type 0). Scan and recovery pass over skip frames; Read of one fails
// with ErrCorrupt. A damaged range is never shorter than a frame header
// (see Recovery), so no shorter padding form exists.
//
// These constants, the naming scheme and the layouts above are part of the
// on-disk format and must not change without a new version byte.
//
// A sealed segment also has a sum file beside it, <segment>.sum, with the
// CRC32C of all its record bytes, written when it is sealed (its layout,
// and why a missing one is no failure, are in sum.go). Segments sealed
// before sum files existed have none and are checked by their frames.
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
// # Preallocation
//
// Unless Options.NoPreallocate is set, segments are written over zeros
// that are already in the file and synced, so that an append does not
// grow the file and its fdatasync has no size to commit (prealloc.go). A
// goroutine keeps one spare file, SpareName, written in full with zeros
// and synced; a roll writes the header into it, syncs it, renames it to
// the new segment's name and syncs the directory, or creates the segment
// as above when no spare is ready. A new log's first, empty segment is
// replaced by the spare the same way if one is ready at the first write.
// The last segment's file therefore holds its records and then zeros; a
// roll cuts the sealed segment back to its records (synced) before its
// successor exists, so every other segment's file ends with its last
// record. A frame of zeros has type 0 and never parses as a record, so
// zeros after the last record are the log's clean end (see Recovery).
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
// Open lists the segments, removes a spare (SpareName) and trailing files
// without a valid header that are no longer than a header or hold only
// zeros (interrupted creations), checks every other header and that each
// segment starts where its predecessor ends, and then reads the last
// segment record by record. Zeros from a frame boundary to the end of the
// last segment are its preallocated space: kept, counted in
// RecoveryInfo.PreallocatedBytes, neither damage nor cut. Torn tails are only
// ever in the last segment, so Open costs one segment's scan whatever the
// log's size.
//
// A bad record there (a frame running past the end of the file, type 0, or
// a checksum that fails) is either the torn tail of a crash or media
// damage, and what follows it tells them apart. Recovery looks for the
// next frame that validates and chains: it is followed by another frame
// that validates, or it ends exactly at the end of the file.
//
//   - Nothing chains in the rest of the file (zeros, garbage, a partial
//     frame): a torn tail. It is cut (Truncate, then Sync), and
//     Recovery().Reason says so.
//   - Something chains: valid records follow the damage, and under
//     FlushSync they were acknowledged. Open fails with a *DamageError
//     (errors.Is ErrCorrupt) that names the file, the damaged range's
//     position, offset and length, and the valid records and bytes after
//     it, and says to run `hourglass repair --data-dir DIR`. Nothing is
//     cut.
//
// Where valid frames start again. The bad frame starts at a record
// boundary (every frame before it validated), and frames are at least
// FrameHeaderSize long, so the search starts FrameHeaderSize bytes after
// it; that also makes every damaged range at least one frame header long,
// which a skip frame can always cover exactly. A payload is a client's
// bytes and may hold byte strings that frame valid records (forged or
// not). Three rules keep them from being taken for records:
//
//  1. the bad frame's own length field is tried first: if the damage
//     spared it, the frame after it is the true next record, and nothing
//     inside the damaged payload is considered; a length reaching exactly
//     the end of the file means nothing follows (a torn tail);
//  2. an earlier candidate beats that length only if the bad frame
//     validates when cut off there (the damage hit the length alone);
//  3. a candidate must chain. A frame-shaped run inside a payload is
//     almost never followed by another valid frame, so it is passed over,
//     and searching from the earliest offset then finds the true next
//     boundary, keeping the most records.
//
// What is left: a payload crafted to end in a chain of valid frames (or
// whose checksum prefix is forged to pass rule 2), in a record whose
// length field alone (or whose payload after the forged part) the media
// damages. The forged frames would then be taken for records. That needs
// a media fault in that very record, Open still refuses first, and Repair
// reports each range; callers that take positions from clients must check
// them on their own (a log position is not proof that a record was
// written by Append). The search is in memory over the rest of the
// segment and runs only when a bad record is found; cheap header checks of
// both frames come before any checksum.
//
// Out-of-order writeback by a real disk can also leave valid, never
// acknowledged frames after a hole in the unsynced tail. Open then refuses
// too: the error costs a restart, never data. Repair salvage keeps those
// records (a producer that saw no acknowledgement may have sent them
// again); truncate mode drops them. Preallocation makes this likelier: on
// ext4 (data=ordered) the blocks of an append join the file only at the
// journal commit of its fdatasync, so a power loss drops the unsynced
// batch whole, while a batch written over preallocated zeros has no such
// commit, and the disk may keep a later page of it without an earlier one
// (zeros, then valid frames of the batch).
//
// Repair (offline: the log must not be open) checks every segment. Each
// damaged range is first copied to <segment>.damaged-<position> beside
// the log (never replacing an existing file), and that file and the
// directory are synced before the segment is touched. In salvage mode the
// range is then overwritten with a skip frame of its exact length and
// synced, so every later position, and so every message ID, stays what it
// was; a torn tail of the last segment is cut. In truncate mode the last
// segment is cut at its first damage, as Open did before it told the two
// apart. Damage in a sealed segment is salvaged in both modes: cutting it
// would break the chain of positions. RepairReport lists each range, its
// quarantine file, and what was kept and lost. A crash during Repair loses
// nothing: running it again finishes the work.
//
// Damage Open does not repair:
//
//   - a record that fails validation in a sealed (not last) segment is
//     reported by Read and Scan as ErrCorrupt when they reach it; Open
//     succeeds (it reads only the last segment) and the records around it
//     stay readable (Repair salvages it). DamagedAt tells such damage from
//     an I/O error and names its position. Scrub finds it while the log is
//     open, before a reader meets it, by reading a sealed segment at a
//     pace its caller sets;
//   - a bad header on a segment holding records, or segments that do not
//     chain, make Open (and Repair) fail with ErrCorrupt naming the file.
//
// # Caveats
//
// Every segment file stays open while the log is open. Read and Scan
// validate each record's checksum; Read of a position that is not a record
// boundary fails with ErrCorrupt (with overwhelming probability) rather
// than returning garbage.
package commitlog
