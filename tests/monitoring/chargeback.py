"""The chargeback figures of the synthetic scenario (synthetic.py), worked out by hand; the promtool
tests and the real Prometheus must both answer them.

What a device is of a GPU: an H100 is whole; a 1g.10gb instance of an A100 is 1 of its 7 compute
slices. Over the three hours (0, 3h] alpha (cost centre cc-1) holds 8 + 8 + 1 H100s all along;
beta (cc-2) holds 4 H100s, and 3 slices (mig-job) plus 2 more for the burst's hour (30m..89m).
Used GPU-hours are engine activity times what is held.
"""

from __future__ import annotations

SLICE_OF_A100 = 1 / 7
ALPHA_BUSY = 8 * 0.9 + 8 * 0.8 + 0.01  # train-0, train-1 (GPU_UTIL fallback), notebook
CC1_ALPHA, CC2_BETA = {"cost_center": "cc-1", "tenant": "alpha"}, {"cost_center": "cc-2", "tenant": "beta"}
HOURS = 3

GPU_HOURS_ALLOCATED = [
    ({**CC1_ALPHA, "gpu_class": "h100"}, 17 * HOURS),  # 51
    ({**CC2_BETA, "gpu_class": "h100"}, 4 * HOURS),  # 12
    ({**CC2_BETA, "gpu_class": "a100-mig"}, 3 * SLICE_OF_A100 * HOURS + 2 * SLICE_OF_A100 * 1),  # 11/7
]
GPU_HOURS_USED = [
    ({**CC1_ALPHA, "gpu_class": "h100"}, ALPHA_BUSY * HOURS),  # 40.83
    ({**CC2_BETA, "gpu_class": "h100"}, 4 * 0.5 * HOURS),  # 6
    ({**CC2_BETA, "gpu_class": "a100-mig"}, 3 * SLICE_OF_A100 * 0.6 * HOURS + 2 * SLICE_OF_A100 * 0.3 * 1),  # 6/7
]
