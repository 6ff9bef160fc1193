package engine

// deadLettersWaiting is the number of moves to dead-letter topics waiting
// for the loop. Under mu.
func (c *consumers) deadLettersWaiting() int { return len(c.deadLetters) }
