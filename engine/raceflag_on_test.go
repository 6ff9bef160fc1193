//go:build race

package engine

// raceEnabled: the tests run under -race, whose sync.Pool drops a share of
// what is put back on purpose, so a count of allocations saved by a pool
// means nothing there.
const raceEnabled = true
