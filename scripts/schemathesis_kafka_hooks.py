"""Schemathesis hooks for a Kafka-mode worker (scripts/schemathesis.sh with
SCHEMATHESIS_KAFKA set, against docs/openapi-kafka.yaml).

The embedded API's rules (schemathesis_hooks) for a message, a
reschedule and a forecast hold in Kafka mode as well or are stricter (400
days where Kafka mode allows 100 years), so they only drop more valid
cases: this filter applies them. Its filter_case hook itself is not used:
it drops every path parameter holding a percent escape, which the
tester's encoding of a free-form key is full of (a key is any string in
Kafka mode, so a key the server reads decoded is still a valid key). The
rules only Kafka mode has, which OpenAPI 3.0 cannot state, drop these
schema-valid cases:

- a property named after a control header (_deliverAt, _delayMs,
  _bizTopic, _cancel) or starting with "hourglass-" (the worker sets those);
- a reschedule without a new time (delay or at);
- a business topic that is one of the worker's own topics, named in
  $SCHEMATHESIS_KAFKA_TOPICS (comma-separated).

Schema-violating (negative) cases are never dropped.

One hook keeps the run's messages pending: a valid send or reschedule due
within the hour is moved to an hour from now. Otherwise the worker would
forward them during the run to the random business topics they name; a
produce to a topic being auto-created fails once and aborts the worker's
transaction, and until the worker's session is back a forecast answers 503
(documented, but a 5xx fails the run).
"""

import os
import time

import schemathesis

import schemathesis_hooks as base  # registers the shared hooks

schemathesis.hooks.GLOBAL_HOOK_DISPATCHER.unregister(base.filter_case)

CONTROL = {"_deliverAt", "_delayMs", "_bizTopic", "_cancel"}
OWN_TOPICS = set(filter(None, os.environ.get("SCHEMATHESIS_KAFKA_TOPICS", "").split(",")))


def reserved_property(msg):
    props = msg.get("properties") if isinstance(msg, dict) else None
    if not isinstance(props, dict):
        return False
    return any(k in CONTROL or k.startswith("hourglass-") for k in props)


@schemathesis.hook("filter_case")
def kafka_filter_case(context, case):
    if not base.is_positive(case):
        return True
    path, body = case.operation.path, case.body
    now_ms = int(time.time() * 1000)
    if (case.path_parameters or {}).get("topic") in OWN_TOPICS:
        return False
    if path == "/v1/forecast":
        return not base.forecast_breaks_rules(case.query, now_ms)
    if path.endswith("/messages"):
        return not (base.message_breaks_rules(body, now_ms) or reserved_property(body))
    if path.endswith("/reschedule") and isinstance(body, dict):
        if base.message_breaks_rules(body, now_ms):
            return False
        return body.get("delay") not in (None, "") or body.get("at") not in (None, 0)
    return True


HOUR_MS = 3_600_000


def keep_pending(body, now_ms):
    if not isinstance(body, dict):
        return
    delay, at = body.get("delay"), body.get("at")
    if isinstance(at, int) and at >= now_ms + HOUR_MS:
        return
    if isinstance(delay, str) and delay and (base.duration_ms(delay) or 0) >= HOUR_MS:
        return
    body["at"], body["delay"] = None, "1h"


@schemathesis.hook("map_case")
def kafka_map_case(context, case):
    path = case.operation.path
    if base.is_positive(case) and (path.endswith("/messages") or path.endswith("/reschedule")):
        keep_pending(case.body, int(time.time() * 1000))
    return case
