// Package server runs hourglass as a network service: its configuration
// (flags, environment, config file), the HTTP/JSON API v1 over the engine,
// and the process lifecycle (listen, serve, drain, close).
//
// The API is documented in docs/openapi.yaml; its JSON shapes and the
// error code <-> status table are package api, shared with the Go client.
// Every error is a JSON body {"error":{"code","message"}} whose code is one
// of package errs and fixes the HTTP status (api.Status).
package server
