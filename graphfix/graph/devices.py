"""Device specifications, parsed and merged as `tf.DeviceSpec` does.

A device string names up to five fields: `/job:ps/replica:0/task:1/device:GPU:0`. Legacy
forms (`/gpu:0`, `/cpu:*`) and partial ones (`/job:worker`) are accepted. Merging follows
`DeviceSpec.merge_from`: every field the other spec sets overrides ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property, lru_cache

_LEGACY_TYPES = frozenset({"CPU", "GPU", "TPU", "CUSTOM", "EPU"})
_FIELDS = frozenset({"job", "replica", "task", "device_type", "device_index"})


class DeviceSpec:
    """A parsed device string; every field is optional (None means "unconstrained").
    Frozen: compared and hashed by its fields, so specs serve as keys."""

    def __init__(self, job: str | None = None, replica: int | None = None,
                 task: int | None = None, device_type: str | None = None,
                 device_index: int | None = None):
        # Set past `__setattr__`, which refuses every assignment (`cached_property` stores
        # `_text` in the instance dict, past it too).
        set_field = object.__setattr__
        set_field(self, "job", job)
        set_field(self, "replica", replica)
        set_field(self, "task", task)
        set_field(self, "device_type", device_type)
        set_field(self, "device_index", device_index)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    # The fields written out in both (no helper call): specs are hashed on the hot path.
    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return ((self.job, self.replica, self.task, self.device_type, self.device_index)
                == (other.job, other.replica, other.task, other.device_type, other.device_index))

    def __hash__(self) -> int:
        return hash((self.job, self.replica, self.task, self.device_type, self.device_index))

    def __repr__(self) -> str:
        return (f"DeviceSpec(job={self.job!r}, replica={self.replica!r}, task={self.task!r}, "
                f"device_type={self.device_type!r}, device_index={self.device_index!r})")

    @staticmethod
    def parse(spec: str) -> "DeviceSpec":
        """Parse a device string. Raises ValueError naming the part that is not understood."""
        return _parse(spec or "")

    def merge(self, other: "DeviceSpec") -> "DeviceSpec":
        """Return self with every field that `other` sets taken from `other`."""
        return _merge(self, other)

    def replace(self, **fields) -> "DeviceSpec":
        """Return a copy with the given fields changed."""
        unknown = set(fields) - _FIELDS
        if unknown:
            raise TypeError(f"DeviceSpec has no field {sorted(unknown)[0]!r}")
        get = fields.get
        return DeviceSpec(get("job", self.job), get("replica", self.replica),
                          get("task", self.task), get("device_type", self.device_type),
                          get("device_index", self.device_index))

    def to_string(self) -> str:
        """The canonical form TF writes: `/job:x/replica:0/task:0/device:CPU:0`."""
        return self._text

    @cached_property
    def _text(self) -> str:
        # Kept on the spec (not in a cache keyed by it: hashing a spec costs more than this).
        out = []
        if self.job is not None:
            out.append(f"/job:{self.job}")
        if self.replica is not None:
            out.append(f"/replica:{self.replica}")
        if self.task is not None:
            out.append(f"/task:{self.task}")
        if self.device_type is not None:
            index = "*" if self.device_index is None else self.device_index
            out.append(f"/device:{self.device_type}:{index}")
        return "".join(out)

    def __str__(self) -> str:
        return self.to_string()


@lru_cache(maxsize=4096)
def _merge(ours: DeviceSpec, theirs: DeviceSpec) -> DeviceSpec:
    return DeviceSpec(
        theirs.job if theirs.job is not None else ours.job,
        theirs.replica if theirs.replica is not None else ours.replica,
        theirs.task if theirs.task is not None else ours.task,
        theirs.device_type if theirs.device_type is not None else ours.device_type,
        theirs.device_index if theirs.device_index is not None else ours.device_index,
    )


def _index(text: str, spec: str) -> int | None:
    if text == "*":
        return None
    if not text.isdigit():
        raise ValueError(f"bad device index {text!r} in device {spec!r}")
    return int(text)


@lru_cache(maxsize=4096)
def _parse(spec: str) -> DeviceSpec:
    fields: dict = {}
    for part in spec.split("/"):
        if not part:
            continue
        bits = part.split(":")
        head = bits[0]
        if len(bits) == 2 and head in ("job", "replica", "task"):
            if head == "job":
                fields["job"] = bits[1]
            else:
                fields[head] = _index(bits[1], spec)
        elif len(bits) in (1, 2) and head.upper() in _LEGACY_TYPES:
            fields["device_type"] = head.upper()
            fields["device_index"] = _index(bits[1], spec) if len(bits) == 2 else None
        elif len(bits) in (2, 3) and head == "device":
            fields["device_type"] = bits[1]
            fields["device_index"] = _index(bits[2], spec) if len(bits) == 3 else None
        else:
            raise ValueError(f"unknown part {part!r} in device {spec!r}")
    return DeviceSpec(**fields)


def canonical(spec: str) -> str:
    """`spec` in TF's canonical spelling (`/gpu:0` becomes `/device:GPU:0`)."""
    return _parse(spec or "").to_string()


def same_device(one: str, other: str) -> bool:
    """Whether two requested devices name one device, however spelled (`/gpu:0` and
    `/device:GPU:0`); a device TF cannot parse is only itself."""
    if one == other:
        return True
    try:
        return canonical(one) == canonical(other)
    except ValueError:
        return False


def device_type(spec: str) -> str | None:
    """The device type a device string names, upper-cased (`/gpu:1` -> `GPU`), or None."""
    kind = _parse(spec or "").device_type
    return kind.upper() if kind else None


# The device types graphfix places graphs on (it knows their kernels and stand-ins).
TARGET_TYPES = ("CPU", "GPU")


def target_devices(values: Iterable[str]) -> tuple[str, ...]:
    """The target devices given (`/gpu:0`, `/job:worker/task:1/device:GPU:0`), in TF's
    spelling; ValueError naming the first that is not a CPU or GPU device."""
    out = []
    for value in values:
        try:
            spec = _parse(value.strip())
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a device ({exc}); give devices like "
                             "/gpu:0,/gpu:1") from None
        kind = (spec.device_type or "").upper()
        if kind not in TARGET_TYPES:
            raise ValueError(f"{value!r} names no {' or '.join(TARGET_TYPES)} device; give "
                             "devices like /gpu:0,/gpu:1")
        out.append(spec.to_string())
    return tuple(out)
