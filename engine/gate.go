package engine

import "sync"

// ckptGate orders checkpoints against appenders. serial is taken first
// (one checkpoint, or backup, at a time); the RWMutex is held shared by an
// appender from before its append until its effect is applied, and
// exclusively by a checkpoint while it captures its state.
type ckptGate struct {
	sync.RWMutex
	serial sync.Mutex
}

// sideIndexes are the indexes beside the send path that keep their own
// locks, so that none waits on mu: the dedup IDs of sends in flight
// (dedup.go), the pending counts by due second (forecast.go; made early
// in recovery, nil before), the damage report (damage.go) and the
// storage trouble /healthz reports (health.go).
type sideIndexes struct {
	dedup dedupClaims
	fc    *forecastState
	dmg   damageState // damage found in the log and messages set aside (damage.go)
	// health remembers failing fire records and checkpoints (health.go).
	health healthState
	scrub  scrubState // the background scrub's passes (scrub.go)
}
