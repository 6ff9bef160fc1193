//go:build race

package kafkamode_test

// raceBuild: these tests run under the race detector, so the worker binary
// they start is built with it too.
const raceBuild = true
