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
from promote.accel.tokens import NEITHER, Generations, TokenError, compare_tokens, read_tokens
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
    """What one run wrote: named arrays (one unnamed for .npy), or token ids per request (`generations`)."""

    arrays: dict[str, np.ndarray[Any, Any]]
    tokens: bool
    ulp_scale: dict[str, int]  # BF16 widened to float32: its ULP is 2**16 of float32's
    generations: Generations | None = None


def locate(out: Path) -> Path:
    """The file the command wrote for `{out}`: the path itself, or it with the suffix numpy and mlx add."""
    if out.is_file():
        return out
    found = [out.with_name(out.name + s) for s in SUFFIXES if out.with_name(out.name + s).is_file()]
    if len(found) == 1:
        return found[0]
    # `{out}` as configured: the temporary path it stood for is promote's, not the team's.
    raise OutputError("wrote nothing to {out}" if not found else "wrote more than one output for {out}")


def read_output(path: Path, role: str) -> Output:
    """Read by content, not by name: numpy's magic, a zip (npz), a safetensors header, else JSON token ids.

    `role` names the file in an error ("the parity output with the switch on"), never its temporary path.
    """
    try:
        head = path.read_bytes()[:16]
        if head.startswith(b"\x93NUMPY"):
            return Output({"": np.load(path, allow_pickle=False)}, False, {})
        if head.startswith(b"PK"):
            with np.load(path, allow_pickle=False) as npz:
                return Output({k: npz[k] for k in sorted(npz.files)}, False, {})
        if len(head) >= 9 and head[8:9] == b"{":
            try:
                return _safetensors(path, role)
            except (ValueError, KeyError, TypeError, struct.error) as e:
                if isinstance(e, OutputError):
                    raise
                # JSON lines can have a brace there too (`{"req": {...`): not a safetensors header, read as text.
        return _tokens(path, role)
    except (OSError, ValueError, zipfile.BadZipFile, struct.error, KeyError) as e:
        if isinstance(e, OutputError):
            raise
        if isinstance(e, TokenError):
            raise OutputError(str(e)) from None
        raise OutputError(f"{role} is not an array or a token list ({type(e).__name__})") from None


def _safetensors(path: Path, role: str) -> Output:
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
            raise OutputError(f"{role}: tensor {name} has dtype {spec['dtype']}, which promote cannot compare")
        start, end = spec["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=dtype).reshape(spec["shape"])
        if spec["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
            scale[name] = 1 << 16
        arrays[name] = array
    return Output(arrays, False, scale)


def _tokens(path: Path, role: str) -> Output:
    try:
        return Output({}, True, {}, read_tokens(path.read_text(encoding="utf-8"), role))
    except UnicodeDecodeError:
        raise OutputError(f"{role} {NEITHER}") from None
    except TokenError as e:
        raise OutputError(str(e)) from None


def _ordered(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Floats as integers in the order of the values they encode: adjacent floats differ by 1 (one ULP)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    i = a.view(bits).astype(np.int64)
    return np.where(i < 0, -(i & np.int64(np.iinfo(bits).max)), i)


def compare(off: Output, on: Output, *, atol: float, rtol: float) -> ParityResult:
    """identical (bitwise), within-tolerance or differs, with how far apart and where first."""
    if off.generations is not None and on.generations is not None:
        try:
            return compare_tokens(off.generations, on.generations)
        except TokenError as e:
            raise OutputError(str(e)) from None
    if (off.generations is None) != (on.generations is None):
        kinds = ["token ids" if o.generations is not None else "arrays" for o in (off, on)]
        raise OutputError(f"the outputs are {kinds[0]} with the switch off and {kinds[1]} with it on")
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
