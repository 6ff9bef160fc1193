//go:build !race

package kafkamode_test

// raceBuild: see race_test.go.
const raceBuild = false
