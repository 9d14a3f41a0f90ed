"""Ingest: what turns a watch line or a file's object into a projected object, and how to read one.

Enters: raw API objects (a dict from YAML or JSON) or watch lines (bytes). Leaves: projections,
the only shape the rest of the model reads (projection.py's `project()`, or the fast path's
msgspec Structs and packed Pods, fastpath/, both generated from schema.py's one declaration of
every field read); what was set aside and why (quarantine.py); and the readers every room reads
objects with: keys and conditions (objects.py), the kinds registry (kinds.py), Flux references
(flux.py) and revision strings (revisions.py).

Imports nothing of the model but types.py: every other room stands on this one.
"""
