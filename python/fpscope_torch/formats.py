"""The formats a PyTorch run can cast to, by the names fpscope's run log gives them (`fpscope table`
lists the same names), with each one's largest finite value: a value past it is what a cast into
the format overflows (a culprit's "overflow"). A test holds every name and value here to
`fpscope table --exact`."""

import torch

LARGEST = {
    "fp16": 65504.0,
    "bf16": 3.3895313892515355e38,  # (2 - 2^-7) x 2^127
    "fp32": 3.4028234663852886e38,  # (2 - 2^-23) x 2^127
    "fp64": 1.7976931348623157e308,  # (2 - 2^-52) x 2^1023
    "tf32": 3.4011621342146535e38,  # (2 - 2^-10) x 2^127
    "e4m3": 448.0,
    "e5m2": 57344.0,
    "e4m3fnuz": 240.0,
    "e5m2fnuz": 57344.0,
    "e2m1": 6.0,
    "e2m3": 7.5,
    "e3m2": 28.0,
}

# torch's names for them (dtype names, and the dtypes' own aliases).
_TORCH_NAMES = {
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32", "float64": "fp64", "double": "fp64",
    "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "float8_e4m3fnuz": "e4m3fnuz", "float8_e5m2fnuz": "e5m2fnuz",
    "float4_e2m1fn_x2": "e2m1",
}

_BLOCK_SCALED = ("mx", "nvfp4")


def format_name(fmt):
    """`fmt` -- a name (any case, "torch." before it or not) or a torch dtype -- as the run log names
    it; ValueError naming `fmt` where it is none of LARGEST's formats."""
    given = fmt
    if isinstance(fmt, torch.dtype):
        fmt = str(fmt)
    if not isinstance(fmt, str):
        raise ValueError(f"fmt={given!r}: name the format the run casts to (\"fp16\", \"bf16\", \"e4m3\", ...) or give its torch dtype")
    name = fmt.strip().lower()
    name = name[len("torch."):] if name.startswith("torch.") else name
    name = _TORCH_NAMES.get(name, name)
    if name in LARGEST:
        return name
    if name.startswith(_BLOCK_SCALED):
        raise ValueError(f"fmt={given!r} is a block-scaled format: pass blocks={given!r} for its block statistics, "
                         "and fmt the format the run's tensors are cast to")
    raise ValueError(f"fmt={given!r} is not a format fpscope_torch records for: expected "
                     + ", ".join(LARGEST) + " (or the torch dtype of one)")


def format_of_activations(dtypes, float32_says=True):
    """The format a run casts to, as the floating-point dtypes of its recorded activations (module
    outputs) tell it: "bf16" or "fp16" where the 16-bit ones are all of the one (autocast, or a
    model converted with .to()), "fp32" where every one is float32, "fp64" where every one is
    float64 (a model converted with .double()); None where they do not say -- both 16-bit dtypes,
    float32 beside float64, only float8 outputs, or none recorded (a compiled model's).
    Of parameters' dtypes (float32_says=False), float32 says nothing: autocast keeps them so."""
    floating = {d for d in dtypes if d.is_floating_point}
    halves = floating & {torch.float16, torch.bfloat16}
    if len(halves) == 1:
        return "bf16" if torch.bfloat16 in halves else "fp16"
    if floating == {torch.float64}:
        return "fp64"
    if float32_says and floating == {torch.float32}:
        return "fp32"
    return None


def autocast_format(device_type):
    """The format torch.autocast casts to on `device_type` ("cuda", "cpu", ...) where it is on in
    the caller: "bf16" or "fp16" (the products' dtype), else None (off, or another dtype)."""
    try:
        if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4: one pair for every device type
            enabled, dtype = torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)
        elif device_type == "cpu":
            enabled, dtype = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
        elif device_type == "cuda":
            enabled, dtype = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
        else:
            return None
    except (RuntimeError, TypeError, ValueError):  # a device type this torch's autocast does not know
        return None
    if not enabled:
        return None
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype)
