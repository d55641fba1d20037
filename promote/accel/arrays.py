"""Read a parity command's output (.npy, .npz, .safetensors arrays or JSON token ids) and compare two of them."""

from __future__ import annotations

import json
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from promote.accel.results import ParityResult
from promote.core.vocab import ParityVerdict

# safetensors dtype names -> numpy; BF16 is read as its raw 16 bits and widened (exactly) to float32.
_SAFETENSORS = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}  # fmt: skip
SUFFIXES = (".npy", ".npz", ".safetensors", ".json")


class OutputError(ValueError):
    """An output that cannot be read or compared; the message is one line."""


@dataclass(frozen=True)
class Output:
    """What one run wrote: named arrays (one unnamed for .npy and tokens), and whether they are token ids."""

    arrays: dict[str, np.ndarray[Any, Any]]
    tokens: bool
    ulp_scale: dict[str, int]  # BF16 widened to float32: its ULP is 2**16 of float32's


def locate(out: Path) -> Path:
    """The file the command wrote for `{out}`: the path itself, or it with the suffix numpy and mlx add."""
    if out.is_file():
        return out
    found = [out.with_name(out.name + s) for s in SUFFIXES if out.with_name(out.name + s).is_file()]
    if len(found) == 1:
        return found[0]
    raise OutputError(f"wrote nothing to {out}" if not found else f"wrote more than one output for {out}")


def read_output(path: Path) -> Output:
    """Read by content, not by name: numpy's magic, a zip (npz), a safetensors header, else JSON token ids."""
    try:
        head = path.read_bytes()[:16]
        if head.startswith(b"\x93NUMPY"):
            return Output({"": np.load(path, allow_pickle=False)}, False, {})
        if head.startswith(b"PK"):
            with np.load(path, allow_pickle=False) as npz:
                return Output({k: npz[k] for k in sorted(npz.files)}, False, {})
        if len(head) >= 9 and head[8:9] == b"{":
            return _safetensors(path)
        return _tokens(path)
    except (OSError, ValueError, zipfile.BadZipFile, struct.error, KeyError) as e:
        if isinstance(e, OutputError):
            raise
        raise OutputError(f"{path.name} is not an array or a token list ({type(e).__name__}: {e})") from None


def _safetensors(path: Path) -> Output:
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = data[8 + size :]
    arrays, scale = {}, {}
    for name, spec in sorted(header.items()):
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS.get(spec["dtype"])
        if dtype is None:
            raise OutputError(f"{path.name}: tensor {name} has dtype {spec['dtype']}, which promote cannot compare")
        start, end = spec["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=dtype).reshape(spec["shape"])
        if spec["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
            scale[name] = 1 << 16
        arrays[name] = array
    return Output(arrays, False, scale)


def _tokens(path: Path) -> Output:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise OutputError(
            f"{path.name} is not an array (.npy, .npz, .safetensors) or a JSON list of token ids"
        ) from None
    array = np.array(value, dtype=object)
    if (
        not isinstance(value, list)
        or array.dtype != object
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in array.ravel())
    ):
        raise OutputError(f"{path.name} is JSON but not a list of token ids (integers)")
    return Output({"": array.astype(np.int64)}, True, {})


def _ordered(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Floats as integers in the order of the values they encode: adjacent floats differ by 1 (one ULP)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    i = a.view(bits).astype(np.int64)
    return np.where(i < 0, -(i & np.int64(np.iinfo(bits).max)), i)


def compare(off: Output, on: Output, *, atol: float, rtol: float) -> ParityResult:
    """identical (bitwise), within-tolerance or differs, with how far apart and where first."""
    if set(off.arrays) != set(on.arrays):
        raise OutputError(f"the outputs hold different arrays: {sorted(off.arrays)} off, {sorted(on.arrays)} on")
    total = mismatched = 0
    max_abs, max_ulp, first = 0.0, 0, None
    identical = within = True
    for name, a in off.arrays.items():
        b = on.arrays[name]
        label = f"{name} " if name else ""
        if a.shape != b.shape:
            raise OutputError(f"{label}shapes differ: {list(a.shape)} off, {list(b.shape)} on")
        total += a.size
        same_bits = a.dtype == b.dtype and a.tobytes() == b.tobytes()
        if same_bits:
            continue
        identical = False
        x, y = a.astype(np.float64), b.astype(np.float64)
        differ = ~((x == y) | (np.isnan(x) & np.isnan(y)))
        mismatched += int(differ.sum())
        if first is None and differ.any():
            index = ", ".join(str(int(i)) for i in np.argwhere(differ)[0])
            first = f"{name}[{index}]"
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(x - y)[differ]
        max_abs = max(max_abs, float(np.nanmax(diff)) if diff.size else 0.0)
        max_ulp = max(max_ulp, _ulp(a, b, differ, off.ulp_scale.get(name, 1)))
        within = within and bool(np.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True)) and not off.tokens
    verdict: ParityVerdict = "identical" if identical else "within-tolerance" if within else "differs"
    return ParityResult(
        verdict=verdict, total=total, mismatched=mismatched, max_abs_diff=max_abs, max_ulp=max_ulp,
        first_mismatch=first, tokens=off.tokens, tokens_flipped=mismatched if off.tokens else None,
    )  # fmt: skip


def _ulp(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], differ: np.ndarray[Any, Any], scale: int) -> int:
    if a.dtype != b.dtype:
        return 0  # different encodings: no common unit in the last place
    if a.dtype.kind == "f" and a.dtype.itemsize in (2, 4, 8):
        with np.errstate(over="ignore"):
            gap = np.abs(_ordered(a)[differ] - _ordered(b)[differ])
        # A wrapped difference (values of opposite sign at the ends of the range) is as far as they can be.
        gap = np.where(gap < 0, np.iinfo(np.int64).max, gap)
        return int(gap.max()) // scale if gap.size else 0
    if a.dtype.kind in "iu":
        return int(np.abs(a.astype(object)[differ] - b.astype(object)[differ]).max()) if differ.any() else 0
    return 0
