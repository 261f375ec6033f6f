"""JSON Schemas of what turnlens sends, transcribed from Alertmanager's documentation.

Webhook: https://prometheus.io/docs/alerting/latest/configuration/#webhook_config (payload version 4).
API v2: `postableAlerts` in https://github.com/prometheus/alertmanager/blob/main/api/v2/openapi.yaml
(labels required; annotations, startsAt, endsAt, generatorURL optional; label sets map string → string).
"""

from __future__ import annotations

RFC3339 = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$"

LABEL_SET = {"type": "object", "additionalProperties": {"type": "string"}}

WEBHOOK_ALERT = {
    "type": "object",
    "required": ["status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"],
    "additionalProperties": False,
    "properties": {
        "status": {"enum": ["firing", "resolved"]},
        "labels": {**LABEL_SET, "required": ["alertname"]},
        "annotations": LABEL_SET,
        "startsAt": {"type": "string", "pattern": RFC3339},
        "endsAt": {"type": "string", "pattern": RFC3339},
        "generatorURL": {"type": "string"},
        "fingerprint": {"type": "string", "minLength": 1},
    },
}

WEBHOOK_V4 = {
    "type": "object",
    "required": [
        "version",
        "groupKey",
        "truncatedAlerts",
        "status",
        "receiver",
        "groupLabels",
        "commonLabels",
        "commonAnnotations",
        "externalURL",
        "alerts",
    ],
    "additionalProperties": False,
    "properties": {
        "version": {"const": "4"},
        "groupKey": {"type": "string"},
        "truncatedAlerts": {"type": "integer", "minimum": 0},
        "status": {"enum": ["firing", "resolved"]},
        "receiver": {"type": "string"},
        "groupLabels": LABEL_SET,
        "commonLabels": LABEL_SET,
        "commonAnnotations": LABEL_SET,
        "externalURL": {"type": "string"},
        "alerts": {"type": "array", "minItems": 1, "items": WEBHOOK_ALERT},
    },
}

POSTABLE_ALERTS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["labels"],
        "additionalProperties": False,
        "properties": {
            "labels": {**LABEL_SET, "minProperties": 1},
            "annotations": LABEL_SET,
            "startsAt": {"type": "string", "pattern": RFC3339},
            "endsAt": {"type": "string", "pattern": RFC3339},
            "generatorURL": {"type": "string"},
        },
    },
}
