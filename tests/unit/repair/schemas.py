"""JSON Schemas shared by the repair tests."""

from __future__ import annotations

from typing import Any

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "location": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1},
    },
    "required": ["location"],
    "additionalProperties": False,
}

ORDER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "customer": {"$ref": "#/$defs/Customer"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string"},
                    "quantity": {"type": "integer"},
                    "unit": {"type": "string", "enum": ["piece", "box", "pallet"]},
                },
                "required": ["sku", "quantity"],
            },
        },
        "express": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["customer", "items"],
    "$defs": {
        "Customer": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "tier": {"enum": ["gold", "silver"]}},
            "required": ["id"],
        }
    },
}
