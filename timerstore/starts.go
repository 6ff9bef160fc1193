package timerstore

import "slices"

// Starts returns the start of every bucket holding entries (written or
// buffered), ascending. Unlike NextBucket it does not change the search
// order: the engine reads every bucket through it once at recovery, to
// count pending messages by due time.
func (s *Store) Starts() []int64 {
	out := make([]int64, 0, len(s.sizes))
	for b := range s.sizes {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}
