package kafkamode

import (
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
)

// rangeSet is a set of offsets kept as ascending, disjoint, non-adjacent
// ranges [start, end): a partition's offsets resolved out of due order at
// or above its committed offset (partProgress.resolved). Offsets resolved
// behind one long-delayed message are consecutive, so they are one range
// however many they are: its size follows what is in flight (the pending
// offsets that split it), not history.
type rangeSet struct {
	rs []offRange
}

// offRange is the offsets [start, end).
type offRange struct {
	start, end int64
}

// contains reports whether o is in the set.
func (s *rangeSet) contains(o int64) bool {
	i, _ := slices.BinarySearchFunc(s.rs, o, func(r offRange, o int64) int {
		switch {
		case r.end <= o:
			return -1
		case r.start > o:
			return 1
		}
		return 0
	})
	return i < len(s.rs) && s.rs[i].start <= o && o < s.rs[i].end
}

// addAll adds the ascending offsets os, merging them with the ranges in
// one pass.
func (s *rangeSet) addAll(os []int64) {
	if len(os) == 0 {
		return
	}
	add := make([]offRange, 0, len(os))
	for _, o := range os {
		if k := len(add); k > 0 && add[k-1].end >= o {
			add[k-1].end = max(add[k-1].end, o+1)
			continue
		}
		add = append(add, offRange{o, o + 1})
	}
	s.merge(add)
}

// merge adds the ascending, disjoint ranges add.
func (s *rangeSet) merge(add []offRange) {
	out := make([]offRange, 0, len(s.rs)+len(add))
	i, j := 0, 0
	for i < len(s.rs) || j < len(add) {
		var r offRange
		if j == len(add) || i < len(s.rs) && s.rs[i].start <= add[j].start {
			r, i = s.rs[i], i+1
		} else {
			r, j = add[j], j+1
		}
		if k := len(out); k > 0 && out[k-1].end >= r.start {
			out[k-1].end = max(out[k-1].end, r.end)
			continue
		}
		out = append(out, r)
	}
	s.rs = out
}

// dropBelow removes every offset below c.
func (s *rangeSet) dropBelow(c int64) {
	i := 0
	for i < len(s.rs) && s.rs[i].end <= c {
		i++
	}
	s.rs = s.rs[i:]
	if len(s.rs) > 0 && s.rs[0].start < c {
		s.rs[0].start = c
	}
	if cap(s.rs) > 64 && len(s.rs) < cap(s.rs)/4 {
		s.rs = slices.Clone(s.rs)
	}
}

// count is the number of offsets in the set.
func (s *rangeSet) count() int64 {
	var n int64
	for _, r := range s.rs {
		n += r.end - r.start
	}
	return n
}

// A resolution record ("resolved" in the package doc) is what one
// transaction resolved of a delay partition at or above the offset it
// commits, as ranges, in the state partition of the same number:
//
//	key   = "<delay topic>/<p>/resolved/<slot>"
//	value = 0x01 | uvarint epoch | uvarint n |
//	        n x ( uvarint start - previous end (first: - 0) | uvarint length )
//
// epoch is the id of the partition's latest committed snapshot (0: none
// yet) and slot counts the records written since it, from 0. A snapshot
// makes the records of older epochs useless, and its slots are reused,
// so compaction keeps at most as many resolution keys per partition as
// the most records one epoch held (a snapshot is forced at
// maxResolutionSlots).
const resolutionVersion = 0x01

// maxResolutionSlots is the number of resolution records after which a
// partition's next snapshot is taken at once rather than at its interval:
// it bounds what a take-over reads after the snapshot.
const maxResolutionSlots = 4096

// resolution is one decoded resolution record.
type resolution struct {
	epoch  uint64
	slot   int
	ranges []offRange
}

func resolutionKey(delayTopic string, p int32, slot int) []byte {
	return []byte(delayTopic + "/" + strconv.Itoa(int(p)) + "/resolved/" + strconv.Itoa(slot))
}

// parseResolutionKey returns the slot a state key of partition p names,
// if it is a resolution key.
func parseResolutionKey(key []byte, delayTopic string, p int32) (int, bool) {
	prefix := delayTopic + "/" + strconv.Itoa(int(p)) + "/resolved/"
	k := string(key)
	if !strings.HasPrefix(k, prefix) {
		return 0, false
	}
	slot, err := strconv.Atoi(k[len(prefix):])
	if err != nil || slot < 0 {
		return 0, false
	}
	return slot, true
}

// encodeResolution encodes the ascending offsets os (at least one).
func encodeResolution(epoch uint64, os []int64) []byte {
	var rs rangeSet
	rs.addAll(os)
	b := binary.AppendUvarint([]byte{resolutionVersion}, epoch)
	b = binary.AppendUvarint(b, uint64(len(rs.rs)))
	var prev int64
	for _, r := range rs.rs {
		b = binary.AppendUvarint(b, uint64(r.start-prev))
		b = binary.AppendUvarint(b, uint64(r.end-r.start))
		prev = r.end
	}
	return b
}

// decodeResolution decodes a resolution record's value.
func decodeResolution(v []byte) (uint64, []offRange, error) {
	r := &snapReader{err: errSnapCorrupt}
	if len(v) > 0 && v[0] == resolutionVersion {
		r = &snapReader{b: v[1:]}
	}
	epoch, n := r.uvarint(), r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		return 0, nil, errSnapCorrupt
	}
	out := make([]offRange, 0, n)
	var prev int64
	for range n {
		gap, length := int64(r.uvarint()), int64(r.uvarint())
		if length <= 0 || gap < 0 || (len(out) > 0 && gap == 0) || prev+gap+length < prev {
			r.err = errSnapCorrupt
		}
		if r.err != nil {
			return 0, nil, r.err
		}
		out = append(out, offRange{prev + gap, prev + gap + length})
		prev += gap + length
	}
	if len(r.b) != 0 {
		return 0, nil, errSnapCorrupt
	}
	return epoch, out, nil
}

// commitMetaPrefix starts the metadata of the worker's group offset
// commits: "hourglass/1 state=<offset> member=<member ID>". The offset is
// where, in the state partition of the same number, the partition's latest
// committed snapshot begins (-1: none), so a new owner reads the state
// partition from there instead of from its start.
const commitMetaPrefix = "hourglass/1 state="

func commitMeta(stateFrom int64, member string) string {
	return commitMetaPrefix + strconv.FormatInt(stateFrom, 10) + " member=" + member
}

// parseCommitMeta returns the state offset a commit's metadata names; ok
// is false for metadata that is not a worker's of this version (then the
// state partition is read from its start).
func parseCommitMeta(meta string) (int64, bool) {
	rest, ok := strings.CutPrefix(meta, commitMetaPrefix)
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, " ")
	o, err := strconv.ParseInt(num, 10, 64)
	if err != nil || o < -1 {
		return 0, false
	}
	return o, true
}
