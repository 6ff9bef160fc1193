// Package keyindex maps a business key to the latest message that carries
// it: hash(topic, key) -> commit-log position of that message. It backs
// cancel and inspect by key.
//
// # Shape: a small log-structured merge index
//
// The RAM it keeps must not grow with the number of keys (far-future keyed
// messages may number tens of millions), so the map lives on disk:
//
//   - a memtable (a Go map) takes the Puts since the last checkpoint; it is
//     the only part whose size depends on the traffic, and it is bounded by
//     what arrives between two checkpoints;
//   - Prepare freezes it (frozen memtables stay readable) and a Job writes
//     it out as an immutable sorted run file, outside every lock; the job
//     first sorts the frozen maps into one array of 16-byte entries, which
//     then answers in their place until the run is installed, so that a
//     checkpoint holds each key once, not in a map and its sorted copy;
//   - each run keeps in RAM only the first hash of each 4 KiB block, 8 bytes
//     per 255 keys (about 0.03 B per key), so a lookup costs one pread of
//     one block per run; the blocks are read with pread, not mapped, so the
//     page cache holding them is not part of the broker's RSS;
//   - a Job also merges the newest runs into its output when they are not
//     much larger than it (size-tiered: a run absorbs the next older one
//     while that one is at most mergeRatio times its size, and always when
//     there would be more than maxRuns), streaming through them block by
//     block. The run count stays at about log(N / checkpoint size), at most
//     maxRuns; each entry is rewritten a few times over its life.
//
// There is no bloom filter: at 10 bits per key it would cost 1.25 B per key
// of RAM, forty times the sparse index, to save a few preads that the page
// cache serves in microseconds; with few runs it is not worth the budget.
//
// Meaning. For each hash, the entry with the greatest position wins,
// wherever it stands: Get returns the maximum over the memtable, the frozen
// memtables and every run. Positions grow in log order, so the latest
// message wins whatever order concurrent senders call Put in (they call it
// in the engine's lock order, which may differ from log order), and a
// newer run may hold a smaller position for a hash than an older one
// without harm; a merge keeps only the greatest position of each hash. The
// caller reads the record at the position anyway (a 64-bit hash may
// collide), so a position whose message retention removed is harmless: it
// reads as gone. SetMinPos lets merges drop such entries; Get may still
// return one.
//
// # Files
//
// The run files and the state are package sortedrun's, which draws their
// layouts and writes and checks them: a run file, named %016x.kix, is
// 4096-byte blocks of 255 entries of 16 bytes (hash u64, pos u64) in
// strictly increasing hash order, each block checked by a CRC-32C bound
// to its run and place, then the run's tail (its sparse index); the state
// ("kixs") lists the runs. Get checks the block it reads. Open takes each
// run's sparse index from its tail, checked, reading only its first and
// last blocks, so that a start does not read 10 M keys' 160 MiB; Verify,
// which the engine runs in the background (its scrub), checks every
// block, the counts, the order and the sum. A run without a good tail (one
// written before tails) is read and checked whole at Open. A nil state is
// an empty index.
//
// # Checkpoint protocol and trust
//
// Put is called under the engine's lock, which must never wait for I/O, so
// writing is split in three: Prepare (under the caller's lock, cheap: it
// freezes the memtable and picks the runs to merge), Job.Run (no lock: it
// writes the new run, fsyncs it and the directory), Complete (cheap: it
// installs the run and returns the state). Everything Put before Prepare is
// covered by that state; the caller re-puts what its log holds after the
// checkpoint when it opens the index again.
//
// The run files are a cache derived from the commit log. Open checks what
// it reads of every run the state lists and fails with ErrCorrupt naming
// the file and offset on any disagreement; the caller may then open with a
// nil state and re-put every key from the log. Damage Verify finds later
// leaves a mark (the file DAMAGED) in the directory: the next Open of a
// state fails with ErrCorrupt, so the caller rebuilds, and the rebuild's
// Open, with a nil state, deletes it. Open deletes the run files the state does
// not list: those of a Job that never completed, or that a later state made
// obsolete. A run a merge replaced is not deleted at Complete, because the
// caller's previous checkpoint still lists it until the new one is durable:
// Release deletes it once the caller says so.
//
// A failed fsync is final. After a failed fsync Linux may mark the
// unwritten pages clean, so a later fsync succeeds without writing them.
// The Index then fails every later Prepare and Complete with
// ErrSyncFailed, and the engine stops; the next Open, from the last
// checkpoint's state, never sees the doubtful file.
//
// Concurrency. An Index is safe for concurrent use. Put, Prepare, Complete,
// SetMinPos and Stats hold its mutex only briefly and never do I/O under
// it; Get reads the files after releasing it; Job.Run takes it once,
// briefly, to hand over its sorted entries. At most one Job is
// outstanding at a time.
package keyindex
