// Package timerstore keeps far-future timers on disk, so that memory does
// not grow with the number of pending messages: only the buckets of the
// near window are read into the engine's in-memory timing wheel.
//
// # Shape: sorted runs, one a checkpoint
//
// A bucket is the time range [start, start+width) in Unix milliseconds (one
// minute by default); the engine loads one bucket at a time as the near
// window reaches it. The entries themselves are kept in immutable run
// files sorted by due time:
//
//   - a memtable (entries by bucket) takes the Adds since the last
//     checkpoint; it is bounded by what arrives between two checkpoints;
//   - Prepare freezes it (a frozen memtable stays readable) and a Job
//     writes it out as one run file, outside every lock, merging older
//     runs into it when they are not much larger (size-tiered, by the
//     sortedrun.Tier that package keyindex uses too) or when more than
//     half of a run is dead;
//   - each run keeps in RAM only the due time of the first entry of each
//     4 KiB block (8 bytes per 170 entries), so loading a bucket costs one
//     read of a few blocks per run.
//
// Why runs and not a file per bucket (the layout before): a checkpoint of
// timers spread over 30 days touched some 43,000 one-minute buckets, and
// creating that many files put their inodes and directory entries into the
// ext4 journal commits that the commit log's fdatasyncs wait for
// (docs/benchmarks.md, issue 8 eighth pass). A checkpoint now creates at
// most one file, written sequentially.
//
// Dead entries. Remove(t) forgets every bucket that ends at or before t:
// the entries due before the start of t's bucket ("the cut") in every
// source that exists at that moment are dead from then on. Each source
// keeps the highest cut it was given (deadBelow); readers and merges skip
// its entries below it, and a run whose entries are all dead is dropped
// from the run set without being read. An entry added after the Remove, to
// a bucket it forgot, lives in a newer source and is not affected. A run
// set therefore never holds a live entry in a forgotten bucket that a load
// would miss, nor brings back a forgotten one.
//
// A bucket may hold the same (due, pos) pair in more than one source: the
// engine re-adds from its log what came after the checkpoint, and a
// rescheduled message may come back to a due time it had. Load returns
// each pair once; a merge keeps one.
//
// # Files
//
// The run files and the state are package sortedrun's, which draws their
// layouts and writes and checks them: a run file, named %016x.tr, is
// 4096-byte blocks of 170 entries of 24 bytes (drawn at EntrySize) in
// strictly increasing (due, pos) order, each block checked by a CRC-32C
// bound to its run and place, then a tail whose summary is drawn at
// bucketAux; the state ("tmrs") lists the runs with
// their deadBelow. A nil state is an empty store. Entries hold absolute
// due times, so the files do not depend on the bucket width: the width
// may change between two runs of the broker.
//
// # Checkpoint protocol and trust
//
// Add is called under the engine's lock, which must never wait for I/O, so
// writing is split in three: Prepare (under the owner's lock, cheap: it
// freezes the memtable and picks the runs to merge or drop), Job.Run (no
// lock: it writes the new run, fsyncs it and the directory), Complete
// (cheap: it installs the run and returns the state). Everything Added
// before Prepare is covered by that state; the engine re-adds what its log
// holds after the checkpoint when it opens the store again.
//
// The run files are a cache derived from the commit log. Each run ends
// with a tail (package sortedrun) holding its sparse index and, as its
// summary, the width it was written with and the count of each bucket it
// holds. Open without a visit takes both from the tail, checked, and reads
// only the run's first and last blocks, so that its cost does not grow
// with the timers; the engine then reads the runs whole in the
// background (RunsPlan.Each, which checks every block, count, the order,
// the sum and the sparse index). A run without a usable tail (none, one
// that fails its check, a summary of another width or one that disagrees
// with the run) is read whole at Open and counted again: a tail is never
// trusted. Damage is ErrCorrupt naming the file and offset; the engine
// then opens with a nil state and re-adds every pending timer from its
// log. Damage Each finds leaves a mark (the file DAMAGED) that fails the
// next Open of a state, so that the engine rebuilds then. Open deletes every other file in the
// directory: runs of a Job whose checkpoint never became durable, runs a
// later state made obsolete, and the bucket files of the layout before.
// A run a merge replaced is not deleted at Complete, because the engine's
// previous checkpoint still lists it until the new one is durable: Release
// deletes it once the engine says so.
//
// A failed Job writes nothing the store relies on: its file is deleted, and
// the frozen entries it was writing stay frozen and readable for the next
// Job, which writes them into a new file. No file is ever written, or
// fsynced, twice, so a failed fsync whose pages Linux marked clean is never
// vouched for by a later one.
//
// Concurrency. A Store is not safe for concurrent use: the engine calls it
// under its lock. Job.Run and LoadPlan.Read run without that lock: they
// read only immutable run files, frozen memtables and what the plan
// copied. Each run file is kept open; its handle is closed when the store
// has released it and no plan or job still reads it.
package timerstore
