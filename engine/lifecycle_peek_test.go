package engine

// kickPending reports whether a wake-up of the dispatch loop waits to be
// taken: a test that parks the loop waits until none does.
func (l *lifecycle) kickPending() bool { return len(l.kick) > 0 }
