"""fpscope run logs as TensorBoard event files: any run log (fpscope train's, the app's export, the
bridge's), converted once, or written live by Recorder(..., tensorboard=logdir).

    python -m fpscope_torch.tensorboard run.jsonl runs/fp16    # then: tensorboard --logdir runs

Per recorded tensor, two histograms with one bucket per binade, counts exactly the log's:
  `<kind>/<name>`       magnitudes |x| at scale 1 (the recorded scale divided out, as fpscope
                        analyze does): the bucket of binade b ends at 2^(b+1), a power of two, and
                        a first bucket ending at 0 holds the zeros;
  `<kind>/<name> log2`  the same counts over log2|x| (bucket b ends at b + 1), zeros left out: on
                        TensorBoard's linear axis this is the one to read.
TensorBoard's `sum` and `sum_squares` are written as 0: binade counts do not give them.
Scalars per step: `fpscope/loss`, `fpscope/loss_scale`, `fpscope/skipped` (0 or 1); per recorded
tensor, for the run's format at the scale the values were recorded with (the shares `fpscope
analyze` prints at --scale recorded): `<kind>/<name> %zero` (exact zeros and values the cast
flushes), `%subnormal`, `%overflow`, and `non-finite` where a value was infinite or NaN.

Needs the tensorboard package (pip install tensorboard); torch's SummaryWriter writes the files."""

import argparse
import json
import math
import os
import sys

# The formats a run log's header names, as (binade of the smallest subnormal, binade of the
# smallest normal, largest binade); held to `fpscope analyze` by python/tests/test_integrations.py.
_RANGES = {}
for names, limits in (
        (("fp16", "float16", "binary16", "half", "e5m10"), (-24, -14, 15)),
        (("bf16", "bfloat16", "e8m7"), (-133, -126, 127)),
        (("fp32", "float32", "binary32", "single", "e8m23"), (-149, -126, 127)),
        (("tf32", "e8m10"), (-136, -126, 127)),
        (("fp64", "float64", "binary64", "double", "e11m52"), (-1074, -1022, 1023)),
        (("e4m3", "fp8-e4m3", "float8_e4m3fn", "e4m3fn"), (-9, -6, 8)),
        (("e5m2", "fp8-e5m2", "float8_e5m2"), (-16, -14, 15)),
        (("e2m3", "fp6-e2m3", "float6_e2m3fn"), (-3, 0, 2)),
        (("e3m2", "fp6-e3m2", "float6_e3m2fn"), (-4, -2, 4)),
        (("e2m1", "fp4-e2m1", "float4_e2m1fn"), (-1, 0, 2))):
    for name in names:
        _RANGES[name] = limits


def format_range(name):
    """(smallest subnormal binade, smallest normal binade, largest binade) of a format the header
    names, or None for one this table does not hold (its shares are then not written)."""
    return _RANGES.get((name or "").strip().lower())


def shares(bins, zero, total, limits):
    """What a cast into the format does to a tensor recorded at 2^scale_log2, at binade
    granularity as `fpscope analyze` counts it: the binade under the smallest subnormal rounds to
    it or to zero and counts as kept, the top binade as not overflowing. Percentages of `total`
    (finite and non-finite values alike)."""
    smallest_subnormal, smallest_normal, largest = limits
    flushed = subnormal = overflow = 0
    for binade, count in bins:
        if binade < smallest_subnormal - 1:
            flushed += count
        elif binade < smallest_normal:
            subnormal += count
        elif binade > largest:
            overflow += count
    percent = (lambda n: 100.0 * n / total) if total else (lambda n: 0.0)
    return {"%zero": percent(zero + flushed), "%subnormal": percent(subnormal), "%overflow": percent(overflow)}


def summary_writer_type():
    """torch's SummaryWriter, or an ImportError in one sentence where the tensorboard package is not
    installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise ImportError(f"writing TensorBoard events needs the tensorboard package (pip install tensorboard): {error}") from None
    return SummaryWriter


class EventWriter:
    """Writes a run log's lines as TensorBoard events into `logdir` (made if missing). `purge_step`:
    a run resumed at that step, whose earlier run's events from there on TensorBoard then hides
    (SummaryWriter's purge_step), as the run log's lines from there on are cut."""

    def __init__(self, logdir, purge_step=None):
        self._writer = summary_writer_type()(log_dir=os.fspath(logdir), purge_step=purge_step)
        self._limits = None
        self.warnings = []

    def header(self, header):
        fmt = header.get("format", "")
        self._limits = None if header.get("format_assumed") else format_range(fmt)
        if header.get("format_assumed"):
            self.warnings.append(f"format {fmt!r} is assumed (the run log does not say what the run cast to): no %zero, %subnormal or "
                                 "%overflow scalars")
        elif self._limits is None:
            self.warnings.append(f"format {fmt!r} is not one the TensorBoard writer knows the range of: no %zero, %subnormal or %overflow scalars")
        self._writer.add_text("fpscope/run", "  \n".join(f"**{k}**: {v}" for k, v in header.items() if k != "fpscope_run_log"), 0)

    def line(self, line):
        step = int(line["step"])
        if line.get("loss") is not None:
            self._writer.add_scalar("fpscope/loss", float(line["loss"]), step)
        self._writer.add_scalar("fpscope/loss_scale", float(line.get("loss_scale", 1.0)), step)
        self._writer.add_scalar("fpscope/skipped", 1.0 if line.get("skipped") else 0.0, step)
        for record in line.get("tensors", []):
            self._tensor(record, step)

    def _tensor(self, record, step):
        tag = f"{record['kind']}/{record['name']}"
        bins = sorted((int(b), int(c)) for b, c in record["bins"] if int(c) > 0)
        zero, inf, nan = int(record.get("zero", 0)), int(record.get("inf", 0)), int(record.get("nan", 0))
        scale = float(record.get("scale", 1.0))
        total = sum(c for _, c in bins) + zero + inf + nan
        if bins or zero:
            # Magnitudes at scale 1: the recorded scale divided out of the edges (exactly, for the
            # powers of two loss scales are), binade b's bucket ending at 2^(b+1) / scale.
            limits = ([0.0] if zero else []) + [math.ldexp(1.0, b + 1) / scale for b, _ in bins]
            counts = ([float(zero)] if zero else []) + [float(c) for _, c in bins]
            low = 0.0 if zero else math.ldexp(1.0, bins[0][0]) / scale
            self._writer.add_histogram_raw(tag, min=low, max=limits[-1], num=float(sum(counts)), sum=0.0, sum_squares=0.0,
                                           bucket_limits=limits, bucket_counts=counts, global_step=step)
        if bins:
            offset = math.log2(scale)
            self._writer.add_histogram_raw(tag + " log2", min=bins[0][0] - offset, max=bins[-1][0] + 1 - offset,
                                           num=float(sum(c for _, c in bins)), sum=0.0, sum_squares=0.0,
                                           bucket_limits=[b + 1 - offset for b, _ in bins], bucket_counts=[float(c) for _, c in bins],
                                           global_step=step)
        if self._limits is not None:
            for name, value in shares(bins, zero, total, self._limits).items():
                self._writer.add_scalar(f"{tag} {name}", value, step)
        if inf or nan:
            self._writer.add_scalar(f"{tag} non-finite", float(inf + nan), step)

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()


def _problem_in(line):
    """What makes a step record unwritable, in words, or None: checked for every line before the
    first event is written, so that a bad log leaves no event file behind."""
    number = (int, float)
    if line.get("loss") is not None and not isinstance(line["loss"], number):
        return "\"loss\" is not a number"
    if not isinstance(line.get("loss_scale", 1.0), number) or isinstance(line.get("loss_scale"), bool):
        return "\"loss_scale\" is not a number"
    tensors = line.get("tensors", [])
    if not isinstance(tensors, list):
        return "\"tensors\" is not a list"
    for record in tensors:
        if not isinstance(record, dict) or not isinstance(record.get("name"), str) or not isinstance(record.get("kind"), str):
            return "a tensor record without a \"name\" and a \"kind\""
        bins = record.get("bins")
        if not isinstance(bins, list) or not all(isinstance(b, list) and len(b) == 2 and all(isinstance(v, int) for v in b) for b in bins):
            return f"tensor {record['name']!r}: \"bins\" is not a list of [binade, count] integer pairs"
        if any(not isinstance(record.get(k, 0), int) or record.get(k, 0) < 0 for k in ("zero", "inf", "nan")):
            return f"tensor {record['name']!r}: \"zero\", \"inf\" and \"nan\" must be counts"
        scale = record.get("scale", 1.0)
        if not isinstance(scale, number) or isinstance(scale, bool) or not scale > 0 or not math.isfinite(scale):
            return f"tensor {record['name']!r}: \"scale\" is not a positive number"
    return None


def convert(path, logdir):
    """Writes the run log at `path` as TensorBoard events into `logdir`; returns (steps, snapshots,
    warnings). A torn last line (a run still writing) is skipped, as fpscope's readers skip it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a folder, not a run log") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text: not a run log") from None
    lines = text.split("\n")
    torn = not text.endswith("\n")
    if not lines or not lines[0].strip():
        raise ValueError(f"{path} is empty: not a run log")
    try:
        header = json.loads(lines[0])
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("fpscope_run_log") is not True:
        raise ValueError(f"{path}: its first line is not an fpscope run log header")
    parsed = []
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            if torn and number == len(lines):
                continue
            raise ValueError(f"{path}:{number}: not a JSON object") from None
        if not isinstance(line, dict) or not isinstance(line.get("step"), int):
            raise ValueError(f"{path}:{number}: not a step record (no integer \"step\")")
        problem = _problem_in(line)
        if problem:
            raise ValueError(f"{path}:{number}: {problem}")
        parsed.append(line)
    writer = EventWriter(logdir)
    try:
        writer.header(header)
        for line in parsed:
            writer.line(line)
    finally:
        writer.close()
    return len(parsed), sum(1 for line in parsed if "tensors" in line), writer.warnings


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fpscope_torch.tensorboard",
                                     description="Convert an fpscope run log into TensorBoard event files.")
    parser.add_argument("run_log", help="the run log (JSON Lines) to convert")
    parser.add_argument("logdir", help="the folder to write the event file into (tensorboard --logdir its parent)")
    args = parser.parse_args(argv)
    try:
        steps, snapshots, warnings = convert(args.run_log, args.logdir)
    except (OSError, ValueError, ImportError) as error:
        print(f"fpscope_torch.tensorboard: {error}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"fpscope_torch.tensorboard: warning: {warning}", file=sys.stderr)
    print(f"{args.run_log}: {steps} steps, {snapshots} with histograms, written to {args.logdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
