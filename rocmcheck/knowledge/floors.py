"""Per product, the floors AMD's own validation fails a GPU below (validation_floors.json: RVS gst bf16 GEMM targets,
TransferBench healthcheck limits; scripts/make_knowledge.py regenerates it from AMD's files)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rocmcheck.package_data import read_json

TABLE = "validation_floors.json"
# The keys a product may have, each in the unit its name ends with.
GEMM_BF16_TFLOPS = "gemm_bf16_tflops"
HBM_READ_GBPS = "hbm_read_gbps"
HBM_COPY_GBPS = "hbm_copy_gbps"  # bytes counted once per copy, as TransferBench counts them
HOST_TO_DEVICE_GBPS = "host_to_device_gbps"
DEVICE_TO_HOST_GBPS = "device_to_host_gbps"
BIDIRECTIONAL_GBPS = "bidirectional_gbps"
XGMI_PAIR_GBPS = "xgmi_pair_gbps"
FLOOR_KEYS = (GEMM_BF16_TFLOPS, HBM_READ_GBPS, HBM_COPY_GBPS, HOST_TO_DEVICE_GBPS, DEVICE_TO_HOST_GBPS,
              BIDIRECTIONAL_GBPS, XGMI_PAIR_GBPS)


@dataclass(frozen=True)
class Floor:
    product: str
    key: str
    value: float
    what: str  # which of AMD's tests and settings the number comes from
    source: str  # the URL of the file it was read from (a site's rule file: its path)
    site: bool = False  # a site's own floor (knowledge/site.py, --knowledge), measured the probe's own way

    def cite(self) -> str:
        return f"{self.what} ({self.source})"

    @property
    def who(self) -> str:
        """Whose floor it is, for a verdict's words: "AMD's" or "the site's"."""
        return "the site's" if self.site else "AMD's"


@lru_cache(maxsize=None)
def _products() -> dict[str, Any]:
    return read_json("rocmcheck.knowledge", TABLE)["products"]


def validation_floor(product: str | None, key: str) -> Floor | None:
    """The floor of this product ("MI300X", as gpus.json names it) for this measure; None when AMD publishes none."""
    entry = _products().get(product or "", {}).get(key)
    if entry is None:
        return None
    return Floor(product or "", key, float(entry["value"]), entry["what"], entry["source"])
