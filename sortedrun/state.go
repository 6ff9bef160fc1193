package sortedrun

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Meta is what the state records of one run.
type Meta struct {
	Seq     uint64
	Entries uint64
	// DeadBelow is the user's mark below which the run's entries are dead
	// (timerstore: a due time); recorded only by a format with DeadBelow.
	DeadBelow int64
	// Sum is the CRC-32C, from the format's Seed, of the blocks' checks.
	Sum uint32
}

// State is the durable run set.
type State struct {
	// NextSeq is the sequence number of the next run file.
	NextSeq uint64
	// Runs are the run set, oldest first.
	Runs []Meta
}

const (
	stateVersion = 1
	stateHeader  = 20
	// stateName is how errors name a state.
	stateName = "state"
)

// runSize returns the size of one run's record in the state.
func (f *Format) runSize() int {
	if f.DeadBelow {
		return 32
	}
	return 24
}

// EncodeState returns the bytes of st.
func (f *Format) EncodeState(st State) []byte {
	le := binary.LittleEndian
	b := make([]byte, 0, stateHeader+f.runSize()*len(st.Runs)+4)
	b = append(b, f.Magic...)
	b = le.AppendUint16(b, stateVersion)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint64(b, st.NextSeq)
	b = le.AppendUint32(b, uint32(len(st.Runs)))
	for _, r := range st.Runs {
		b = le.AppendUint64(b, r.Seq)
		b = le.AppendUint64(b, r.Entries)
		if f.DeadBelow {
			b = le.AppendUint64(b, uint64(r.DeadBelow))
		}
		b = le.AppendUint32(b, r.Sum)
		b = le.AppendUint32(b, 0)
	}
	return le.AppendUint32(b, crc32.Update(f.Seed, castagnoli, b))
}

// DecodeState parses and checks a state; nil is the empty state. Values no
// writer makes (a next sequence number of 0, a run out of sequence order
// or too large to have a file) are damage too: Open must not size its
// sparse index from them.
func (f *Format) DecodeState(b []byte) (State, error) {
	le := binary.LittleEndian
	if b == nil {
		return State{NextSeq: 1}, nil
	}
	bad := func(off int, format string, args ...any) (State, error) {
		return State{}, f.corrupt(stateName, int64(off), format, args...)
	}
	if len(b) < stateHeader+4 || string(b[:4]) != f.Magic {
		return bad(0, "not a %s state (%d bytes)", f.Name, len(b))
	}
	if v := le.Uint16(b[4:]); v != stateVersion {
		return bad(4, "version %d, this hourglass reads version %d", v, stateVersion)
	}
	rs := f.runSize()
	n := le.Uint32(b[16:])
	if uint64(len(b)) != stateHeader+uint64(rs)*uint64(n)+4 {
		return bad(16, "%d runs in %d bytes", n, len(b))
	}
	end := len(b) - 4
	if le.Uint32(b[end:]) != crc32.Update(f.Seed, castagnoli, b[:end]) {
		return bad(end, "state fails its check")
	}
	if le.Uint16(b[6:]) != 0 {
		return bad(6, "reserved field is not zero")
	}
	st := State{NextSeq: le.Uint64(b[8:]), Runs: make([]Meta, 0, n)}
	if st.NextSeq == 0 || st.NextSeq == math.MaxUint64 {
		return bad(8, "next sequence number %d", st.NextSeq)
	}
	for i := range int(n) {
		off := stateHeader + rs*i
		p := b[off:]
		m := Meta{Seq: le.Uint64(p), Entries: le.Uint64(p[8:])}
		if f.DeadBelow {
			m.DeadBelow, p = int64(le.Uint64(p[16:])), p[8:]
		}
		m.Sum = le.Uint32(p[16:])
		if le.Uint32(p[20:]) != 0 {
			return bad(off, "run %d: reserved field is not zero", i)
		}
		if m.Seq == 0 || m.Seq >= st.NextSeq || m.Entries == 0 || m.Entries > math.MaxInt64/BlockSize ||
			i > 0 && m.Seq <= st.Runs[i-1].Seq {
			return bad(off, "run %d (seq %d, %d entries) does not fit the run set", i, m.Seq, m.Entries)
		}
		st.Runs = append(st.Runs, m)
	}
	return st, nil
}
