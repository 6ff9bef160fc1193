package engine

// MaxBatch is the most messages one SendBatch accepts (Options.MaxBatch),
// for adapters that must refuse a larger request with their own code.
func (e *Engine) MaxBatch() int { return e.opts.MaxBatch }
