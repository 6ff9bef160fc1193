"""Schemathesis hooks for hourglass (loaded by scripts/schemathesis.sh).

OpenAPI 3.0 cannot state a few rules that docs/openapi.yaml describes in
words; these hooks drop the generated *schema-valid* requests that break
them, so that "valid data was rejected" reports only real mismatches.
Schema-violating (negative) requests are never dropped. The rules:

- the dead-letter topic "%DLQ%" + topic + "." + group is a topic name too,
  so topic and group together are at most 194 bytes;
- a message has body or body_base64, not both, and at most one of delay,
  at and level (an empty delay, a zero at or level, and null are not given);
- key, tag, group and the properties of a message take at most 32 KiB
  (UTF-8 bytes), and a property name is not empty;
- "at" is at most now plus the maximum delay (400 days by default);
- at most one of deadline and ttl, and the deadline they give is not before
  the message's due time nor beyond the maximum delay (a margin of a minute
  and an hour keeps the hook's clock from deciding);
- a dedup_id used before in a topic with another message is a conflict
  (409): valid cases get dedup IDs of their own (map_case);
- a group's backoff_base is at most its backoff_max (1s and 5m when absent),
  at its creation and in a change of its policy (PATCH);
- a seek's "to" is required and not null (nullable in the document only
  because the wire type tells a missing time from 0, the start);
- a message sent to a FIFO topic has a group and no window (the hooks
  remember the topics the run created with "fifo": true);
- a schedule's cron is a valid expression and its tz a known zone (the
  schema says "string"): valid cases get one from a small list, and no
  property named hourglass-schedule or hourglass-fire-time.
- a forecast asks for from < to (from defaults to now, to to from + 1 h),
  to at most the end of 9999, and at most 10,000 buckets.
- a listing's cursor is one the broker gave (a page's next_cursor), so a
  valid case has none; its due_to, when given and not 0, is after
  due_from.

One filter works around the tester: it sends a '%' followed by two hex
digits in a path parameter as it is, not as %25, so the server reads another
name ("a%41" arrives as "aA"); such names are dropped from valid cases.

One more hook bounds the long poll: a receive's "wait" is cut to 100ms, so
that a run does not spend 30 s on each receive of an empty group.

The streaming receive's request body is newline-delimited JSON
(application/x-ndjson), one StreamAck a line, which Schemathesis does not
write by itself: a serializer sends each generated value as one line. It
is sent with a Content-Length, so the broker makes and answers its acks
and leases nothing (a stream that leases is sent chunked).
"""

import json
import re
import time

import schemathesis

MAX_HEADER_BYTES = 32 << 10
MAX_DELAY_MS = 400 * 24 * 3600 * 1000
DLQ_OVERHEAD = len("%DLQ%") + len(".")
NAME_LIMIT = 200
WAIT_CAP = "100ms"

UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
# The default delay levels (RocketMQ 4.x's table), in ms.
LEVELS_MS = [s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)]
DURATION = re.compile(r"^([0-9]+)(ms|s|m|h)$")


def duration_ms(text):
    """Milliseconds of a duration of the spec's patterns; None otherwise."""
    if text == "0":
        return 0
    m = DURATION.match(text)
    if not m:
        return None
    return int(m.group(1)) * UNITS_MS[m.group(2)]


PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def is_positive(case):
    meta = case.meta
    return meta is None or meta.generation.mode.is_positive


def utf8_len(value):
    return len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0


def message_breaks_rules(msg, now_ms):
    if not isinstance(msg, dict):
        return False
    if msg.get("body") is not None and msg.get("body_base64") is not None:
        return True
    given = [msg.get("delay") not in (None, ""), msg.get("at") not in (None, 0), msg.get("level") not in (None, 0)]
    if sum(given) > 1:
        return True
    props = msg.get("properties") or {}
    size = sum(utf8_len(msg.get(f)) for f in ("key", "tag", "group"))
    if isinstance(props, dict):
        if "" in props:
            return True
        size += sum(utf8_len(k) + utf8_len(v) for k, v in props.items())
    if size > MAX_HEADER_BYTES:
        return True
    at = msg.get("at")
    if isinstance(at, int) and at > now_ms + MAX_DELAY_MS - 3_600_000:
        return True
    return deadline_breaks_rules(msg, now_ms)


def due_ms(msg, now_ms):
    """The due time the broker will give msg (at most one option set)."""
    at, delay, level = msg.get("at"), msg.get("delay"), msg.get("level")
    if isinstance(at, int) and at > 0:
        return max(at, now_ms)
    if isinstance(delay, str) and delay:
        return now_ms + (duration_ms(delay) or 0)
    if isinstance(level, int) and 1 <= level <= len(LEVELS_MS):
        return now_ms + LEVELS_MS[level - 1]
    return now_ms


def deadline_breaks_rules(msg, now_ms):
    deadline, ttl = msg.get("deadline"), msg.get("ttl")
    has_deadline = isinstance(deadline, int) and deadline != 0
    ttl_ms = duration_ms(ttl) if isinstance(ttl, str) and ttl else 0
    if has_deadline and ttl_ms:
        return True
    if ttl_ms:
        deadline = now_ms + ttl_ms
    elif not has_deadline:
        return False
    return deadline < due_ms(msg, now_ms) + 60_000 or deadline > now_ms + MAX_DELAY_MS - 3_600_000


# Topics this run created FIFO: a send to one needs a message group.
FIFO_TOPICS = set()


def fifo_without_group(topic, msg):
    """A send a FIFO topic refuses: without a group, or with a window."""
    if topic not in FIFO_TOPICS or not isinstance(msg, dict):
        return False
    return not msg.get("group") or (isinstance(msg.get("window"), int) and msg.get("window") > 0)


def backoff_breaks_rules(cfg):
    if not isinstance(cfg, dict):
        return False
    base = duration_ms(cfg.get("backoff_base") or "1s")
    top = duration_ms(cfg.get("backoff_max") or "5m")
    return base is not None and top is not None and base > top


FORECAST_MAX_BUCKETS = 10_000
FORECAST_MAX_MS = 253402300799999
STEP_WORDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
STEP_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def forecast_breaks_rules(query, now_ms):
    """A forecast needs from < to, to within the year 9999 and at most
    10,000 buckets; from defaults to now, to to from + 1 h, step to 1m."""
    query = query or {}
    try:
        frm = int(query.get("from", now_ms))
        to = int(query.get("to", frm + 3_600_000))
    except (TypeError, ValueError):
        return False
    step = str(query.get("step", "minute"))
    secs = STEP_WORDS.get(step) or (int(step[:-1]) * STEP_UNITS.get(step[-1], 0) if step[:-1].isdigit() else 0)
    if not secs or frm >= to or to > FORECAST_MAX_MS:
        return True
    first, last = frm // 1000, -(-to // 1000)
    return -(-(last - first) // secs) > FORECAST_MAX_BUCKETS


def listing_breaks_rules(query):
    """A listing's cursor must be one the broker gave, and a due range
    must not end before it starts (due_to 0 is no bound)."""
    query = query or {}
    if query.get("cursor") not in (None, ""):
        return True
    try:
        frm = int(query.get("due_from", 0))
        to = int(query.get("due_to", 0))
    except (TypeError, ValueError):
        return False
    return to != 0 and to <= frm


@schemathesis.serializer("application/x-ndjson")
def ndjson_serializer(ctx, value):
    """A stream's ack lines: the generated value (a line's object, or any
    other JSON value in negative cases, null included) as one line."""
    if isinstance(value, bytes):
        return value
    return (json.dumps(value) + "\n").encode("utf-8")


@schemathesis.hook
def filter_case(context, case):
    if not is_positive(case):
        return True
    params = case.path_parameters or {}
    if any(isinstance(v, str) and PERCENT_ESCAPE.search(v) for v in params.values()):
        return False
    topic, group = params.get("topic"), params.get("group")
    if isinstance(topic, str) and isinstance(group, str):
        if utf8_len(topic) + utf8_len(group) + DLQ_OVERHEAD > NAME_LIMIT:
            return False
    body, path = case.body, case.operation.path
    now_ms = int(time.time() * 1000)
    if path == "/v1/forecast":
        return not forecast_breaks_rules(case.query, now_ms)
    if path == "/v1/pending" or path.endswith("/inflight") or path.endswith("/dead"):
        return not listing_breaks_rules(case.query)
    if path.endswith("/messages"):
        return not (message_breaks_rules(body, now_ms) or fifo_without_group(topic, body))
    if path.endswith("/reschedule"):
        return not message_breaks_rules(body, now_ms)
    if path.endswith("/batch") and isinstance(body, dict):
        msgs = body.get("messages") or []
        return not any(message_breaks_rules(m, now_ms) or fifo_without_group(topic, m) for m in msgs)
    if path == "/v1/schedules/{schedule}" and case.method.upper() == "PUT" and isinstance(body, dict):
        return not (message_breaks_rules(body, now_ms) or body.get("topic") in FIFO_TOPICS)
    if path.endswith("/groups/{group}") and case.method.upper() in ("PUT", "PATCH"):
        return not backoff_breaks_rules(body)
    if path.endswith("/groups/{group}/seek"):
        return isinstance(body, dict) and body.get("to") is not None
    return True


# Dedup IDs handed to valid cases, one per case, so that no valid send
# conflicts with an earlier one.
DEDUP_SEQ = [0]


def fresh_dedup_ids(msgs):
    for m in msgs:
        if isinstance(m, dict) and m.get("dedup_id"):
            DEDUP_SEQ[0] += 1
            m["dedup_id"] = "st-%d" % DEDUP_SEQ[0]


CRONS = ["@hourly", "0 9 * * *", "*/15 * * * *", "@every 10m", "30 2 * * 1-5"]
ZONES = [None, "UTC", "Europe/Berlin", "America/New_York"]


def fix_schedule(case):
    """Makes a valid schedule's cron and tz ones the server reads."""
    body = case.body
    if not isinstance(body, dict):
        return
    seed = len(str(body))
    body["cron"] = CRONS[seed % len(CRONS)]
    body["tz"] = ZONES[seed % len(ZONES)]
    props = body.get("properties")
    if isinstance(props, dict):
        props.pop("hourglass-schedule", None)
        props.pop("hourglass-fire-time", None)


def drop_empty_property_names(msgs):
    """The server refuses an empty property name, which OpenAPI 3.0 cannot
    say (no propertyNames); filter_case drops such cases, but the stateful
    phase does not ask it, so valid cases are mended here too."""
    for m in msgs:
        if isinstance(m, dict) and isinstance(m.get("properties"), dict):
            m["properties"].pop("", None)


@schemathesis.hook
def map_case(context, case):
    if is_positive(case) and isinstance(case.body, dict):
        drop_empty_property_names([case.body] + list(case.body.get("messages") or []))
    if is_positive(case) and isinstance(case.body, dict):
        if case.operation.path.endswith("/messages"):
            fresh_dedup_ids([case.body])
        elif case.operation.path.endswith("/batch"):
            fresh_dedup_ids(case.body.get("messages") or [])
    if case.operation.path == "/v1/schedules/{schedule}" and case.method.upper() == "PUT" and is_positive(case):
        fix_schedule(case)
    if case.operation.path.endswith("/receive") and isinstance(case.body, dict):
        wait = case.body.get("wait")
        if isinstance(wait, str):
            ms = duration_ms(wait)
            if ms is not None and ms > duration_ms(WAIT_CAP):
                case.body["wait"] = WAIT_CAP
    return case


@schemathesis.hook
def before_call(context, case, kwargs):
    """The stateful phase builds some cases from links after map_case:
    mend their empty property names too, just before they are sent."""
    if is_positive(case) and isinstance(case.body, dict):
        drop_empty_property_names([case.body] + list(case.body.get("messages") or []))


@schemathesis.hook
def after_call(context, case, response):
    if case.operation.path == "/v1/topics/{topic}" and case.method.upper() == "PUT" and response.status_code == 201:
        if isinstance(case.body, dict) and case.body.get("fifo") is True:
            FIFO_TOPICS.add(case.path_parameters.get("topic"))
