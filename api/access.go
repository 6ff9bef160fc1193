package api

// Whoami answers GET /v1/whoami: the principal the request acts as and
// its rules (package access), so that a client such as the console
// offers only what the principal may do. The broker checks every request
// anyway: this is a courtesy, never the check.
type Whoami struct {
	// Principal is the principal's name: a file principal's, "auth-token"
	// for the -auth-token, "anonymous" when the broker checks nothing.
	Principal string `json:"principal"`
	// Allow is the principal's rules, "action:pattern".
	Allow []string `json:"allow"`
}
