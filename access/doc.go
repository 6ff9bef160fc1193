// Package access decides who may do what: principals, their secrets and
// their permissions, read from a credentials file, and the check every
// surface of the broker (HTTP, console, RocketMQ gRPC and remoting, Kafka
// mode's HTTP) makes before it looks anything up.
//
// # Principals and rules
//
// A principal has a name, a secret and rules. A rule is an action and a
// resource pattern, written "action:pattern":
//
//	send:orders              send to topic orders
//	receive:orders/billing   receive, ack, nack and extend leases as group billing of orders
//	manage:orders            inspect, cancel and reschedule messages of orders
//	admin:topic/orders       create topic orders (admin resources below)
//	metrics:*                GET /metrics, /v1/stats and /v1/forecast
//
// A pattern is exact, or ends with one '*' that matches any rest ("orders-*",
// "orders/*", "*"). A '*' anywhere else is refused, so that a rule never
// means more than it reads. The admin resources are topic/T, group/T/G
// (create a group, redrive its dead letters), schedule/S, clock, backup and
// damage; the metrics resources are metrics, stats and forecast.
//
// # The credentials file
//
// JSON, version 1 (the layout is in file.go). It holds, per principal, its
// name, its rules, a random salt and a keyed hash of its secret:
// HMAC-SHA256 keyed by the salt. It never holds a secret. The broker
// rereads it when its bytes change (Store.Watch polls it), logs every
// reload with its outcome, and keeps the previous rules when the new file
// is bad.
//
// # Why secrets are derived, and what the key file is
//
// RocketMQ clients sign each call with an HMAC keyed by their secret, and
// the verifier of an HMAC must hold its key: a hash of the secret cannot
// check a signature. So a secret is not random on its own: it is
// HMAC-SHA256(K, "hourglass secret v1" | name | salt), where K is a 32-byte
// key kept in a file of its own (the key file, mode 0600, next to the
// credentials file by default). The broker needs K only to verify RocketMQ
// signatures; bearer secrets (HTTP, the console, Kafka mode) are checked
// against the hash alone.
//
// The trade-off, stated plainly: the key file is equivalent to every
// principal's secret. Whoever reads it can sign as anyone. The
// credentials file alone reveals no secret (a salted hash of 256 random
// bits cannot be searched), so it can be reviewed, versioned and copied;
// the key file must stay on the broker's host, out of backups and version
// control. Without the key file the broker still serves bearer secrets,
// and refuses RocketMQ signatures of file principals as unverifiable.
//
// # The token principals
//
// The single -auth-token is the principal "auth-token" with every
// permission, on every surface (any RocketMQ access key that is not a file
// principal signs with it). -metrics-token is the principal
// "metrics-token" with metrics:* only. Neither name can be a file
// principal's.
package access
