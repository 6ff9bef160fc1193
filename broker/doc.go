// Package broker is hourglass's composition root: it turns `hourglass
// serve`'s configuration (flags > environment > config file > defaults,
// Config) into a running broker. It opens the engine on its clock, the
// recurring schedules beside it, the HTTP API (package server), the
// RocketMQ 5 gRPC service (package rocketmq), the RocketMQ remoting
// protocol (package remoting) and the metrics (package metrics), runs
// their listeners, and shuts them down in an order that loses nothing
// acknowledged (Run). OpenEmbedded opens the same broker without
// listeners, for package hourglasstest.
//
// The parts it wires know nothing of each other or of this package; a new
// listener or a part beside the engine is opened here.
package broker
