// Package sortedrun is the small log-structured store under package
// timerstore and package keyindex: immutable run files of fixed-size
// entries in strictly increasing order, a state that lists the durable run
// set, and the steps of the job that writes a run. The two users differ in
// their entry (size, encoding, order) and in what they do with it; a
// Format says which, and everything written to disk is written here.
//
// # Run file layout
//
// A run file, named by its sequence number as %016x followed by the
// format's suffix, is a sequence of 4096-byte blocks (little endian):
//
//	offset size  field
//	0      4080  floor(4080/EntrySize) slots of EntrySize bytes; the first
//	             count hold entries in strictly increasing order (the
//	             format's Compare, no two with the same key) across the
//	             whole file; the other slots, and the bytes after the last
//	             slot, are zero
//	4080   4     count    u32 entries in this block: full in every block but
//	                      the last, 1..full in the last
//	4084   8     reserved u64, written as 0
//	4092   4     check    u32 CRC-32C (Castagnoli) of bytes 0..4091, with the
//	                      register started at CRC-32C(Seed; seq u64, block
//	                      index u64)
//
// A file holds ceil(entries/full) blocks and, in a format with tails
// (Format.Tail), a tail after them. Seeding the
// check with the run's sequence number and the block's index makes a zero
// block (a file extended but never written), a block of another run and a
// block at the wrong offset all fail. An entry's first 8 bytes, its
// lead, start its key and its order (a due time, a hash); a reader keeps
// the lead of each block's first entry in RAM (Run.First) to find the
// blocks it needs. The users' formats:
//
//	user        suffix  entry  key  lead  full  seed        magic   deadBelow  tail
//	timerstore  .tr     24     16   i64   170   0x74696d72  "tmrs"  yes        yes
//	keyindex    .kix    16     8    u64   255   0x6b657973  "kixs"  no         yes
//
// # Tail layout
//
// The tail holds what a reader would otherwise read the whole run for, so
// that opening a run costs the same at any size (little endian):
//
//	offset     size  field
//	0          4     magic    "tail"
//	4          2     version  u16 = 1
//	6          2     reserved u16 = 0
//	8          8     blocks   u64, the file's block count
//	16         8B    first    u64 each: the lead of each block's first entry
//	16+8B      8     last     u64, the lead of the run's last entry
//	24+8B      4     n        u32, the length of the user's summary
//	28+8B      n     summary  the user's (TailAux): timerstore's buckets, none for keyindex
//	28+8B+n    4     check    u32 CRC-32C of the bytes before it, with the
//	                          register started at CRC-32C(Seed xor "tail";
//	                          seq u64, entries u64, sum u32)
//
// Seeding the check with what the state records of the run binds the tail
// to it. The tail is written with the blocks, before the file's one fsync.
// Files written before tails have none and are read whole. A read that
// finds the run damaged withdraws its tail (Run.noteDamage): the magic
// becomes "dmgd", and the tail is never used again.
//
// # State layout
//
// The state lists the durable run set; the users store it in the engine's
// checkpoint and give it back to Open (little endian):
//
//	offset size field
//	0      4    magic   the format's, 4 bytes
//	4      2    version u16 = 1; another version is refused as damage
//	6      2    reserved u16 = 0
//	8      8    nextSeq u64 sequence number of the next run file
//	16     4    n       u32 number of runs, oldest first, seq increasing:
//	20     Rn   runs    seq u64, entries u64, [deadBelow i64,] sum u32
//	                    (CRC-32C, from Seed, of the blocks' check fields in
//	                    order), reserved u32 = 0; R is 32 with deadBelow,
//	                    24 without
//	20+Rn  4    check   u32 CRC-32C from Seed of all bytes before it
//
// A nil state is the empty run set. These layouts are durable: data
// directories written by earlier versions must open unchanged, so a
// change to them needs a new version that reads the old one
// (TestOpenFixture in each user holds files written before this package).
//
// # Durability and trust
//
// A job writes a new run file sequentially in whole blocks, writing it out
// every vfs.PaceBytes, fsyncs the file, then fsyncs the directory; only
// then may a state list it (WriteRun). A run file is never written, nor
// fsynced, twice: a job that fails deletes its file, and the next job
// writes a new one under a new sequence number, so a failed fsync whose
// pages Linux marked clean is never vouched for by a later one. The one
// later write is a damaged run's tail withdrawal (Run.noteDamage), which
// vouches for nothing: if its fsync fails, the damage mark still refuses
// the run, and if both fail the caller is told.
//
// Run files are a cache derived from the commit log. OpenRun checks a
// run whole (its size, every block's check and count, the order, the
// run's sum) and fails with an error wrapping the format's Corrupt error,
// naming the file and offset. OpenRunTail opens a run from its tail
// instead: the tail's check, and its first and last blocks checked and
// compared with it; a tail that fails is never used (the caller reads the
// run whole, which computes it again), and the rest of the run is checked
// by Run.Verify, which the users run in the background. Every read after
// open checks every block it reads, and that the block's first entry is
// the one the sparse index holds; damage any read of a run meets (Verify,
// ReadBlock(s), an iterator's Err) is recorded by the run, once (its tail
// withdrawn, the damage mark written), so that no later open trusts the
// tail.
package sortedrun
