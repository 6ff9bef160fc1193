// Package server is the HTTP/JSON API v1 over the engine: its routes, its
// strict decoding of requests, authentication, and the bounds of every
// connection (NewHTTPServer). It opens nothing and listens nowhere: package
// broker opens the engine and the parts beside it, builds the Handler with
// Options, and runs the listeners.
//
// The API is documented in docs/openapi.yaml; its JSON shapes and the
// error code <-> status table are package api, shared with the Go client.
// Every error is a JSON body {"error":{"code","message"}} whose code is one
// of package errs and fixes the HTTP status (api.Status).
package server
