"""Timing samples summarised the one way every profiler of the package records them."""

import statistics
from typing import Any, Dict, List


def summary(samples: List[float]) -> Dict[str, Any]:
    """Median, min, max, spread ``(max - min) / median`` and the samples (rounded to 1e-6)."""
    med = statistics.median(samples)
    return {
        "median": med,
        "min": min(samples),
        "max": max(samples),
        "spread": (max(samples) - min(samples)) / med if med > 0 else 0.0,
        "samples": [round(s, 6) for s in samples],
    }
