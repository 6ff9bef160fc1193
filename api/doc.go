// Package api is the one written form of the hourglass HTTP API v1 in Go:
// the JSON shape of every request and response body, and the table that
// maps each error code of package errs to its HTTP status.
//
// The server decodes requests into these types and encodes its answers
// from them; the Go client does the reverse. Neither restates a field
// name, so the two cannot drift apart, and a test of this package checks
// docs/openapi.yaml against the same types: every schema's property
// names, which of them are required, and their JSON types.
//
// Conventions the types follow (the OpenAPI test relies on them):
//
//   - A type's name is the name of its schema in docs/openapi.yaml.
//   - A field without omitempty is required: a response always carries
//     it, and a request without it is refused. A field with omitempty is
//     optional; in a request its zero value, null included, means "the
//     default".
//   - Times are Millis (Unix milliseconds); durations are Go duration
//     strings ("250ms", "30s", "1h30m").
//
// The package holds data and the status table only: no I/O, and no
// dependency beyond errs and the standard library, so that a client
// program does not pull the engine in.
package api
