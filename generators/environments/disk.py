"""Disk per task: the unique bytes of the images a set of tasks runs in, shared layers once.

SWE-bench ships an image per task (about 300 MB each); trajforge shares one base image and one
environment image per install profile, so a layer many tasks use is paid for once. The figure is
what a machine must hold to run every task: the union of the images' layers, over the tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trajforge.verifiers.sandbox.base import ImageStore

MB = 1_000_000


@dataclass(frozen=True)
class DiskUse:
    tasks: int
    images: int
    unique_bytes: int  # every distinct layer of those images, counted once
    missing: int  # images named by tasks but not here (not counted)

    @property
    def per_task_mb(self) -> float:
        return self.unique_bytes / MB / self.tasks if self.tasks else 0.0

    def figures(self) -> dict[str, object]:
        """Summary lines."""
        return {
            "environment images": self.images,
            "image MB (unique layers)": round(self.unique_bytes / MB, 1),
            "image MB per task": round(self.per_task_mb, 1),
            **({"images not here": self.missing} if self.missing else {}),
        }


def disk_use(store: ImageStore, task_images: Iterable[str]) -> DiskUse:
    """``task_images``: each task's image name, one per task."""
    names = list(task_images)
    layers: dict[str, int] = {}
    missing = 0
    for image in sorted(set(names)):
        info = store.image_info(image)
        if info is None:
            missing += 1
            continue
        layers.update(info.layers)
    return DiskUse(len(names), len(set(names)) - missing, sum(layers.values()), missing)
