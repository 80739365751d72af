"""Prints the pip requirements of the integrations Home Assistant loads in the test.

Runs inside the root (scripts/ha-setup) with the pinned homeassistant installed: the integrations
Home Assistant always sets up (and its auth modules) (homeassistant.bootstrap's *_INTEGRATIONS sets), the ones the test
configures (mqtt, and frontend for the screenshot) and their manifest dependencies, closed
transitively. Installing these ahead means a run of the test needs no network.
"""
import json
import pathlib

import homeassistant.bootstrap as bootstrap
import homeassistant.components as components

base = pathlib.Path(components.__path__[0])
wanted = {"mqtt", "frontend", "config", "api", "onboarding", "websocket_api", "auth", "http"}
for name in dir(bootstrap):
    value = getattr(bootstrap, name)
    if name.endswith("INTEGRATIONS") and isinstance(value, (set, frozenset, list, tuple)):
        wanted |= {v for v in value if isinstance(v, str)}
seen, requirements, todo = set(), [], sorted(wanted)
while todo:
    name = todo.pop()
    if name in seen:
        continue
    seen.add(name)
    manifest_path = base / name / "manifest.json"
    if not manifest_path.exists():
        continue
    manifest = json.loads(manifest_path.read_text())
    requirements += manifest.get("requirements", [])
    todo += manifest.get("dependencies", [])
# The auth modules' own requirements (Home Assistant's core does not start without them: the
# TOTP and notify MFA modules load at start).
import importlib
import pkgutil

import homeassistant.auth.mfa_modules as mfa
import homeassistant.auth.providers as providers

for package in (mfa, providers):
    for module in pkgutil.iter_modules(package.__path__):
        requirements += getattr(importlib.import_module(f"{package.__name__}.{module.name}"), "REQUIREMENTS", [])
for line in sorted(set(requirements)):
    print(line)
