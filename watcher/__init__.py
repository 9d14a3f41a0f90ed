"""stalewatch: is the doctor in the building? Correlates GitOps status with controller liveness."""

__version__ = "0.1.0"
