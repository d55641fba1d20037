"""Read a parity command's output (.npy, .npz, .safetensors arrays or JSON token ids) and compare two of them."""

from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from promote.accel.results import ParityResult
from promote.accel.tokens import NEITHER, Generations, TokenError, compare_tokens, read_tokens
from promote.core.bounded_json import Json, load_object
from promote.core.vocab import ParityVerdict

# safetensors dtype names -> numpy; BF16 is read as its raw 16 bits and widened (exactly) to float32.
_SAFETENSORS = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}  # fmt: skip
Family = Literal["real", "complex", "text", "records"]  # how an array's values are compared
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
            return _comparable(Output({"": np.load(path, allow_pickle=False)}, False, {}), role)
        if head.startswith(b"PK"):
            with np.load(path, allow_pickle=False) as npz:
                return _comparable(Output({k: npz[k] for k in sorted(npz.files)}, False, {}), role)
        if len(head) >= 9 and head[8:9] == b"{":
            try:
                return _safetensors(path, role)
            except (ValueError, KeyError, TypeError, struct.error) as e:
                if isinstance(e, OutputError):
                    raise
                # JSON lines can have a brace there too (`{"req": {...`): not a safetensors header, read as text.
        return _tokens(path, role)
    except (OSError, ValueError, TypeError, EOFError, zipfile.BadZipFile, struct.error, KeyError) as e:
        if isinstance(e, OutputError):
            raise
        if isinstance(e, TokenError):
            raise OutputError(str(e)) from None
        raise OutputError(f"{role} is not an array or a token list ({type(e).__name__})") from None


def _safetensors(path: Path, role: str) -> Output:
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = load_object(data[8 : 8 + size].decode("utf-8"))
    body = data[8 + size :]
    arrays, scale = {}, {}
    for name, spec in sorted(header.items()):
        if name == "__metadata__":
            continue
        kind = spec.get("dtype") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or not isinstance(kind, str):
            raise TypeError("not a tensor's header")
        dtype = _SAFETENSORS.get(kind)
        if dtype is None:
            raise OutputError(f"{role}: tensor {name} has dtype {kind}, which promote cannot compare")
        offsets, shape = _ints(spec.get("data_offsets")), _ints(spec.get("shape"))
        if len(offsets) != 2:
            raise TypeError("not a tensor's offsets")
        array = np.frombuffer(body[offsets[0] : offsets[1]], dtype=dtype).reshape(shape)
        if kind == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
            scale[name] = 1 << 16
        arrays[name] = array
    return Output(arrays, False, scale)


def _ints(value: Json) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TypeError("not a list of integers")
    return tuple(v for v in value if isinstance(v, int))


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


def _family(a: np.ndarray[Any, Any]) -> Family | None:
    """How an array is compared: numbers by value (complex as complex), text and records exactly; None: not at all."""
    kind = a.dtype.kind
    if kind in "biuf":
        return "real"
    if kind == "c":
        return "complex"
    if kind in "US":
        return "text"
    return "records" if kind == "V" and a.dtype.names else None


def _comparable(output: Output, role: str) -> Output:
    """The output, when every array is of a kind promote compares; an OutputError naming the file by its role."""
    for name, a in output.arrays.items():
        if _family(a) is None:
            label = f"array {name}" if name else "its array"
            raise OutputError(f"{role}: {label} holds {a.dtype} values, which promote cannot compare")
    return output


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
    each = [
        _compare_one(name, a, on.arrays[name], atol=atol, rtol=rtol, scale=off.ulp_scale.get(name, 1))
        for name, a in off.arrays.items()
    ]
    mismatched = sum(r.mismatched for r in each)
    verdicts = {r.verdict for r in each}
    verdict: ParityVerdict = next((v for v in ("differs", "within-tolerance") if v in verdicts), "identical")
    if verdict == "within-tolerance" and off.tokens:
        verdict = "differs"  # token ids are labels: no tolerance makes two of them the same
    return ParityResult(
        verdict=verdict, total=sum(r.total for r in each), mismatched=mismatched,
        max_abs_diff=max((r.max_abs_diff for r in each), default=0.0),
        max_ulp=max((r.max_ulp for r in each), default=0),
        first_mismatch=next((r.first_mismatch for r in each if r.first_mismatch), None), tokens=off.tokens,
        tokens_flipped=mismatched if off.tokens else None,
    )  # fmt: skip


def _compare_one(
    name: str, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], *, atol: float, rtol: float, scale: int
) -> ParityResult:
    """One array of each output, in its own type: numbers by value (complex as complex), text and records exactly."""
    label = f"{name} " if name else ""
    if a.shape != b.shape:
        raise OutputError(f"{label}shapes differ: {list(a.shape)} off, {list(b.shape)} on")
    families = {_family(a), _family(b)}
    exact = bool(families & {"text", "records"})
    # Numbers of any width compare by value; text and records only with their own kind (and the same fields).
    if exact and (a.dtype.kind != b.dtype.kind or (a.dtype.kind == "V" and a.dtype != b.dtype)):
        raise OutputError(f"{label}holds {a.dtype} values with the switch off and {b.dtype} with it on")
    if a.dtype == b.dtype and a.tobytes() == b.tobytes():
        return ParityResult("identical", total=a.size)
    max_abs, max_ulp = 0.0, 0
    if exact:
        # No tolerance applies to text or to a record: they are the same or they differ.
        differ = np.asarray(a != b, dtype=bool)
        within = not differ.any()
    else:
        wide = np.complex128 if "complex" in families else np.float64
        x, y = a.astype(wide), b.astype(wide)
        differ = ~((x == y) | (np.isnan(x) & np.isnan(y)))
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(x - y)[differ]  # complex: the magnitude of the difference, real and imaginary parts both
        max_abs = float(np.nanmax(diff)) if diff.size else 0.0
        max_ulp = _ulp(a, b, differ, scale)
        within = bool(np.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True))
    first = f"{name}[{', '.join(str(int(i)) for i in np.argwhere(differ)[0])}]" if differ.any() else None
    return ParityResult(
        "within-tolerance" if within else "differs", total=a.size, mismatched=int(differ.sum()),
        max_abs_diff=max_abs, max_ulp=max_ulp, first_mismatch=first,
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
    if a.dtype.kind == "c":
        # Each part in its own units in the last place: the larger of the two gaps.
        parts = [(np.ascontiguousarray(getattr(a, p)), np.ascontiguousarray(getattr(b, p))) for p in ("real", "imag")]
        return max(_ulp(x, y, differ, scale) for x, y in parts)
    if a.dtype.kind in "iu":
        return int(np.abs(a.astype(object)[differ] - b.astype(object)[differ]).max()) if differ.any() else 0
    return 0
