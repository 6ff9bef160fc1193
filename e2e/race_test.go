//go:build race

package e2e_test

// raceEnabled: the tests run under -race, so the server binary is built
// with it too and its races fail the run.
const raceEnabled = true
