package loadtest

// Summarize is summarize for other benchmark drivers (internal/rmqbench),
// so that every report of the project computes its quantiles one way: the
// summary of the lateness values ns (nanoseconds, sorted in place).
func Summarize(ns []int64) Lateness { return summarize(ns) }
