package sortedrun

// A run's tail: the sparse index of a run and its user's summary, written
// once after its blocks, so that a reader may open a run without reading
// it whole. The layout is drawn in the package doc (doc.go).

import (
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/hourglass-mq/hourglass/vfs"
)

const (
	tailMagic   = "tail"
	tailVersion = 1
	tailHeader  = 16 // magic, version, reserved, blocks
	// maxAuxEntry bounds a summary: 16 bytes an entry of the run, and 16
	// more (timerstore's is 16 bytes a bucket after a 16-byte header), so
	// that a file grown by garbage is not read whole as a tail.
	maxAuxEntry = 16
)

// tailSize returns the size of the tail of a run of blocks blocks with a
// summary of aux bytes.
func tailSize(blocks, aux int64) int64 { return tailHeader + 8*blocks + 8 + 4 + aux + 4 }

// tailSeed is the register a tail's check starts from: it binds the tail
// to the run the state records (its sequence number, entries and sum),
// so that the tail of another run, or of a run the state does not record
// as it is, fails.
func (f *Format) tailSeed(m Meta) uint32 {
	var b [20]byte
	binary.LittleEndian.PutUint64(b[0:], m.Seq)
	binary.LittleEndian.PutUint64(b[8:], m.Entries)
	binary.LittleEndian.PutUint32(b[16:], m.Sum)
	return crc32.Update(f.Seed^0x7461696c, castagnoli, b[:]) // "tail"
}

// encodeTail returns the tail of run m with its sparse index, last lead
// and summary.
func (f *Format) encodeTail(m Meta, first []uint64, last uint64, aux []byte) []byte {
	le := binary.LittleEndian
	b := make([]byte, 0, tailSize(int64(len(first)), int64(len(aux))))
	b = append(b, tailMagic...)
	b = le.AppendUint16(b, tailVersion)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint64(b, uint64(len(first)))
	for _, x := range first {
		b = le.AppendUint64(b, x)
	}
	b = le.AppendUint64(b, last)
	b = le.AppendUint32(b, uint32(len(aux)))
	b = append(b, aux...)
	return le.AppendUint32(b, crc32.Update(f.tailSeed(m), castagnoli, b))
}

// decodeTail checks tail b of run m and returns its sparse index, last
// lead and summary; otherwise what is wrong with it. The leads must not
// decrease: a sparse index out of order would send a search to the wrong
// block.
func (f *Format) decodeTail(m Meta, b []byte) (first []uint64, last uint64, aux []byte, why string) {
	le := binary.LittleEndian
	blocks := f.Blocks(m)
	fixed := tailSize(blocks, 0)
	switch {
	case int64(len(b)) < fixed:
		return nil, 0, nil, "tail is too short"
	case string(b[:4]) == withdrawnMagic:
		return nil, 0, nil, "tail was withdrawn: a check found the run damaged"
	case le.Uint32(b[len(b)-4:]) != crc32.Update(f.tailSeed(m), castagnoli, b[:len(b)-4]):
		return nil, 0, nil, "tail fails its check"
	case string(b[:4]) != tailMagic || le.Uint16(b[4:]) != tailVersion || le.Uint16(b[6:]) != 0:
		return nil, 0, nil, "tail header is not one this hourglass writes"
	case int64(le.Uint64(b[8:])) != blocks:
		return nil, 0, nil, "tail counts the wrong number of blocks"
	case int64(le.Uint32(b[fixed-8:])) != int64(len(b))-fixed:
		return nil, 0, nil, "tail's summary has the wrong length"
	}
	first = make([]uint64, blocks)
	for i := range first {
		first[i] = le.Uint64(b[tailHeader+8*i:])
		if i > 0 && first[i]^f.flip < first[i-1]^f.flip {
			return nil, 0, nil, "tail's sparse index is out of order"
		}
	}
	last = le.Uint64(b[tailHeader+8*blocks:])
	if last^f.flip < first[blocks-1]^f.flip {
		return nil, 0, nil, "tail's last lead is before its last block's first"
	}
	return first, last, slices.Clone(b[fixed-4 : len(b)-4]), ""
}

// OpenRunTail opens run m of dir from its tail, without reading its
// blocks but the first and the last: the sparse index and the summary
// are the tail's, checked (its check binds it to m's sequence number,
// entries and sum) and compared with those two blocks. A run without a
// usable tail (none: a file of a version before tails; or one that fails)
// returns a nil run and why, and the caller reads the run whole
// (OpenRun), which computes the sparse index again. Damage in the file's
// size or in the two blocks is an error, as in OpenRun. Every other block
// is checked when it is read, against the sparse index too, and Verify
// checks the run whole.
func (f *Format) OpenRunTail(fs vfs.FS, dir string, m Meta) (*Run, string, error) {
	name := f.RunName(dir, m.Seq)
	if m.Entries == 0 {
		return nil, "", f.corrupt(name, 0, "the state lists a run of no entries")
	}
	file, err := fs.Open(name)
	if vfs.IsNotExist(err) {
		return nil, "", f.corrupt(name, 0, "file is missing; the state lists %d entries", m.Entries)
	}
	if err != nil {
		return nil, "", err
	}
	r, why, err := f.openFromTail(file, name, m)
	if r == nil {
		file.Close()
	} else {
		r.fs = fs
	}
	return r, why, err
}

// openFromTail is OpenRunTail on an open file.
func (f *Format) openFromTail(file vfs.File, name string, m Meta) (*Run, string, error) {
	size, err := f.checkSize(file, name, m)
	if err != nil {
		return nil, "", err
	}
	blocks := f.Blocks(m)
	n := size - blocks*BlockSize
	switch {
	case !f.Tail:
		return nil, "the format has no tails", nil
	case n == 0:
		return nil, "the file has no tail", nil
	case n > tailSize(blocks, maxAuxEntry*int64(min(m.Entries, 1<<40)+1)):
		return nil, "tail is too long", nil
	}
	b := make([]byte, n)
	if err := f.readFull(file, name, b, blocks*BlockSize); err != nil {
		return nil, "", err
	}
	first, last, aux, why := f.decodeTail(m, b)
	if why != "" {
		return nil, why, nil
	}
	blk := make([]byte, BlockSize)
	ends := []int64{0, blocks - 1}
	if blocks == 1 {
		ends = ends[:1]
	}
	for _, i := range ends {
		if err := f.readFull(file, name, blk, i*BlockSize); err != nil {
			return nil, "", err
		}
		cnt, _, err := f.checkBlock(blk, name, m.Seq, i)
		if err != nil {
			return nil, "", err
		}
		if want := int(min(m.Entries-uint64(i)*uint64(f.full), uint64(f.full))); cnt != want {
			return nil, "", f.corrupt(name, i*BlockSize+countOff, "block holds %d entries, want %d", cnt, want)
		}
		if Lead(blk) != first[i] || i == blocks-1 && Lead(f.Entry(blk, cnt-1)) != last {
			return nil, "tail disagrees with the blocks it indexes", nil
		}
	}
	r := &Run{Meta: m, Name: name, First: first, Last: last, FromTail: true, Aux: aux, format: f, file: file}
	r.refs.Store(1)
	return r, "", nil
}

// Verify checks the whole run, as OpenRun does (every block's check and
// count, the order, the run's sum and the file's size), and that its
// sparse index, from a tail or not, is the one its blocks give. onRead,
// when not nil, is called with the size of each read before it is made;
// an error from it stops the check and is returned. visit, when not nil,
// is handed every entry in order, valid only during the call (entries of
// a run found damaged later may have been handed already). The caller
// holds a reference to r for the call.
func (r *Run) Verify(onRead func(n int) error, visit func(e []byte)) error {
	// Not r.Meta whole: its user may raise DeadBelow meanwhile.
	m := Meta{Seq: r.Seq, Entries: r.Entries, Sum: r.Sum}
	it := r.format.newIter(m, r.Name, r.file, true)
	it.onRead = onRead
	for it.Next() {
		if visit != nil {
			visit(it.Entry())
		}
	}
	if err := it.Err(); err != nil {
		return r.noteDamage(err)
	}
	if !slices.Equal(it.first, r.First) || Lead(it.Entry()) != r.Last {
		return r.noteDamage(r.format.corrupt(r.Name, r.format.Blocks(m)*BlockSize, "the sparse index disagrees with the blocks"))
	}
	return nil
}

// EncodeTailForTest returns the tail of run m with the given sparse index,
// last lead and summary, with a good check: the users' tests forge tails
// whose check passes, to show the rest of what is checked.
func (f *Format) EncodeTailForTest(m Meta, first []uint64, last uint64, aux []byte) []byte {
	return f.encodeTail(m, first, last, aux)
}
