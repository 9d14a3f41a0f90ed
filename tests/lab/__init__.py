"""The real-Flux lab: real Flux controllers on the test control plane (see lab.py)."""
