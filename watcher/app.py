"""Wires the live watcher, the health model and the HTTP renderers for `stalewatch run`."""
