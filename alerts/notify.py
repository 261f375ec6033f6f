"""Notifiers: what each `--notify` target is sent, and its delivery with a deadline on the whole exchange.

A target is given the records waiting in its outbox (state.AlertState.outbox): stdout and file: as JSON Lines,
webhook: as Alertmanager webhook payloads, one POST per alert name. A record leaves the outbox only when its
POST was answered 2xx; a failed group is kept for the next run and the other groups and targets are still
tried. alertmanager: is sent every firing and recently resolved alert again each run, as Alertmanager expects,
so it needs no outbox. Each POST has one deadline for connect, send and the whole answer: a receiver that
answers a byte at a time cannot hold a run longer than that.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
import urllib.parse
from datetime import datetime, timedelta
from typing import Any, TextIO

from turnlens.alerts.rules import iso
from turnlens.alerts.state import AlertState, Transition

POST_DEADLINE_S = 10.0


class DeliveryError(Exception):
    """A POST did not get a complete 2xx answer within its deadline."""


ZERO_TIME = "0001-01-01T00:00:00Z"  # what Alertmanager's webhook writes as endsAt of a firing alert


def alert_record(transition: Transition, generator_url: str = "") -> dict[str, Any]:
    """One alert as Alertmanager's webhook lists it (also the JSON Lines record of stdout / file:)."""
    alert = transition.alert
    return {
        "status": transition.status,
        "labels": dict(alert.labels),
        "annotations": dict(alert.annotations),
        "startsAt": alert.fired_at or alert.active_at,
        "endsAt": alert.resolved_at if transition.status == "resolved" and alert.resolved_at else ZERO_TIME,
        "generatorURL": generator_url,
        "fingerprint": alert.fingerprint,
    }


def webhook_payloads(records: list[dict[str, Any]], receiver: str = "turnlens") -> list[dict[str, Any]]:
    """Alertmanager webhook payloads (version 4) of alert records, one group per alert name, as Alertmanager
    groups by it; a record's order within its group is kept."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(record["labels"]["alertname"], []).append(record)
    payloads = []
    for name, alerts in sorted(groups.items()):
        common_labels = _common([a["labels"] for a in alerts])
        payloads.append(
            {
                "version": "4",
                "groupKey": f'{{}}:{{alertname="{name}"}}',
                "truncatedAlerts": 0,
                "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
                "receiver": receiver,
                "groupLabels": {"alertname": name},
                "commonLabels": common_labels,
                "commonAnnotations": _common([a["annotations"] for a in alerts]),
                "externalURL": "",
                "alerts": alerts,
            }
        )
    return payloads


def _common(dicts: list[dict[str, str]]) -> dict[str, str]:
    first, *rest = dicts
    return {k: v for k, v in first.items() if all(d.get(k) == v for d in rest)}


def alertmanager_alerts(state: AlertState, at: datetime, resend: timedelta) -> list[dict[str, Any]]:
    """`POST /api/v2/alerts` body: every firing alert again (endsAt a little ahead, so Alertmanager
    keeps it alive until the next run) and every recently resolved one with its endsAt."""
    body = []
    for alert in sorted(state.alerts.values(), key=lambda a: a.fingerprint):
        if alert.state == "firing":
            ends = iso(at + resend)
        elif alert.state == "resolved" and alert.resolved_at:
            ends = alert.resolved_at
        else:
            continue
        body.append(
            {
                "labels": dict(alert.labels),
                "annotations": dict(alert.annotations),
                "startsAt": alert.fired_at or alert.active_at,
                "endsAt": ends,
            }
        )
    return body


# --- delivery -------------------------------------------------------------------------------------


def post_json(url: str, payload: Any, deadline_s: float = POST_DEADLINE_S) -> None:
    """POSTs `payload` as JSON; returns once a 2xx answer was read whole, within `deadline_s` in all.

    A socket timeout bounds each read, not the exchange: a timer shuts the socket down when the deadline
    passes, which ends whatever read is waiting.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DeliveryError(f"not an http(s) URL: {url}")
    factory = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = factory(parts.hostname, parts.port, timeout=deadline_s)
    expired = threading.Event()
    opened: list[socket.socket] = []  # the connection drops its own reference once the answer says close

    def expire() -> None:
        expired.set()
        for sock in opened:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(deadline_s, expire)
    timer.start()
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "turnlens-alerts"}
    try:
        conn.connect()  # bounded by the socket timeout, itself the deadline
        opened.append(conn.sock)
        if expired.is_set():  # the deadline passed while connecting, before the timer could see the socket
            raise TimeoutError
        conn.request("POST", parts.path or "/" + (f"?{parts.query}" if parts.query else ""), body, headers)
        response = conn.getresponse()
        response.read()
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            raise DeliveryError(f"no complete answer within {deadline_s:g} s") from exc
        raise DeliveryError(str(exc) or type(exc).__name__) from exc
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():
        raise DeliveryError(f"no complete answer within {deadline_s:g} s")
    if not 200 <= response.status < 300:
        raise DeliveryError(f"HTTP {response.status} {response.reason}")


def deliver(
    target: str,
    state: AlertState,
    at: datetime,
    resend: timedelta,
    stdout: TextIO | None = None,
    deadline_s: float = POST_DEADLINE_S,
) -> list[str]:
    """Sends `target` what waits for it; what was delivered leaves its outbox. One error per failure."""
    kind, _, where = target.partition(":")
    if kind == "alertmanager":
        body = alertmanager_alerts(state, at, resend)
        try:
            if body:
                post_json(where.rstrip("/") + "/api/v2/alerts", body, deadline_s)
        except DeliveryError as exc:
            return [f"notify {target}: {exc}"]
        return []
    waiting = state.outbox.get(target, [])
    if not waiting:
        return []
    if kind in ("stdout", "file"):
        lines = "".join(json.dumps(record, sort_keys=True) + "\n" for record in waiting)
        try:
            if kind == "stdout":
                out = stdout or sys.stdout
                out.write(lines)
                out.flush()
            else:
                with open(where, "a") as handle:
                    handle.write(lines)
        except OSError as exc:
            return [f"notify {target}: {exc}"]
        state.outbox[target] = []
        return []
    errors = []
    delivered: set[str] = set()
    for payload in webhook_payloads(waiting):
        try:
            post_json(where, payload, deadline_s)
        except DeliveryError as exc:
            errors.append(f"notify {target} ({payload['groupLabels']['alertname']}): {exc}")
        else:
            delivered.add(payload["groupLabels"]["alertname"])
    state.outbox[target] = [r for r in waiting if r["labels"]["alertname"] not in delivered]
    return errors


def check_target(target: str) -> None:
    """Rejects a malformed `--notify` before anything is evaluated."""
    kind, _, where = target.partition(":")
    if kind == "stdout" and not where:
        return
    if kind == "file" and where:
        return
    if kind in ("webhook", "alertmanager") and where.startswith(("http://", "https://")):
        return
    raise ValueError(f"bad notify target {target!r}: use stdout, file:PATH, webhook:URL or alertmanager:URL")
