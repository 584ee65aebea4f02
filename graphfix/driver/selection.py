"""The transforms of one run, each with its options."""

from __future__ import annotations

from typing import Any

from graphfix.registry import Transform, options_for


class Selected:
    """The transforms of one run, each with its options."""

    def __init__(self, transforms: list[tuple[type[Transform], dict[str, Any]]],
                 target_devices: tuple[str, ...] = ()):
        self.transforms = transforms
        self.target_devices = target_devices

    @classmethod
    def build(cls, transforms: list[type[Transform]], settings: dict, target_devices=()):
        return cls([(t, options_for(t, settings)) for t in transforms], tuple(target_devices))
