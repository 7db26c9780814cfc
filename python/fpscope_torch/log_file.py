"""The run log's file as the CLI keeps it: one writer at a time (an flock on the log, held for the
writer's life, taken while its folder's flock orders writers that start together), a new log
appears whole (its header is written to a locked temporary beside it and renamed into place), and
an existing log is neither replaced nor appended to by accident, and a write that fails (a full
disk) leaves the log as it was, its lines whole."""

import fcntl
import json
import os
import re


class RunLogError(ValueError):
    """A run log that cannot be opened as asked, in one sentence naming the path as given."""


def _held_by_another_writer(path):
    """Whether a writer (fpscope train, the app, another Recorder) holds `path`'s lock."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _folder_of(path, given):
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise RunLogError(f"{given}: its folder {os.path.dirname(given) or '.'} does not exist")
    return folder


def _busy(given):
    return RunLogError(f"{given}: another writer (fpscope train, the app or another Recorder) is writing it: "
                       "wait for it to finish, or name another run log")


def create(path, header, overwrite):
    """A new log holding `header`, open for appending and locked. An existing file is replaced only
    with `overwrite`, and never while another writer holds it."""
    given = path
    folder = _folder_of(path, given)
    folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(folder_fd, fcntl.LOCK_EX)
        if os.path.lexists(path):
            if os.path.isdir(path):
                raise RunLogError(f"{given} is a folder: name a file for the run log")
            if _held_by_another_writer(path):
                raise _busy(given)
            if not overwrite:
                raise RunLogError(f"{given} exists: pass append=True to go on with it, or overwrite=True to replace it")
        temporary = os.path.join(folder, f".{os.path.basename(path)}.fpscope-tmp-{os.getpid()}")
        try:
            out = open(temporary, "x+")  # read too: rewrite_header reads the header back
        except OSError as error:
            raise RunLogError(f"{given}: cannot write in its folder ({error.strerror})") from None
        try:
            fcntl.flock(out.fileno(), fcntl.LOCK_EX)
            append(out, (json.dumps(header) + "\n").encode(), given)
            os.replace(temporary, path)  # a follower never sees a half-written header
        except BaseException:
            out.close()
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
        return out  # still locked: the lock lives as long as the file stays open
    finally:
        os.close(folder_fd)


def open_to_append(path):
    """An existing log, open for appending and locked, with its header."""
    given = path
    _folder_of(path, given)
    try:
        out = open(path, "r+")
    except FileNotFoundError:
        raise RunLogError(f"{given} does not exist: there is no run log to append to") from None
    except IsADirectoryError:
        raise RunLogError(f"{given} is a folder: name a run log to append to") from None
    try:
        fcntl.flock(out.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        out.close()
        raise _busy(given) from None
    try:
        header = json.loads(out.readline())
    except ValueError:
        header = None
    if not isinstance(header, dict) or "schema_version" not in header:
        out.close()
        raise RunLogError(f"{given} is not an fpscope run log: cannot append to it")
    out.seek(0, os.SEEK_END)
    return out, header


def append(out, data, given):
    """Appends `data` (whole lines, bytes) to the open log `out` through its descriptor, unbuffered:
    all of it, or -- where the disk fills, a file size limit is reached or the device fails -- none
    of it, the log cut back to where it ended (a torn line in the middle would make every line after
    it unreadable), and a RunLogError naming the log and why."""
    fd = out.fileno()
    end = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as error:
        try:
            os.ftruncate(fd, end)
        except OSError:
            pass
        raise RunLogError(f"{given}: cannot write to it ({error.strerror}); it is left as it was, its lines whole") from None


def rewrite_header(out, written, header):
    """Replaces the header `written` at the start of the open log `out` with `header`, whose line
    is no longer (one format's four-letter name for another's, a key left out), padded with spaces
    to the old line's length: one write in place, so that a reader sees the one line or the other,
    and the lines after it stay where they are. False, and the log untouched, where the new line
    is longer, the log's first line is not `written` as this package writes it (a header padded
    by an earlier rewrite, another writer's spacing), or the write fails."""
    old, new = (json.dumps(written) + "\n").encode(), json.dumps(header).encode()
    if len(new) + 1 > len(old):
        return False
    new += b" " * (len(old) - len(new) - 1) + b"\n"
    try:
        if os.pread(out.fileno(), len(old), 0) != old:
            return False
        return os.pwrite(out.fileno(), new, 0) == len(new)
    except OSError:
        return False


_STEP_FIRST = re.compile(rb'\{"step": (\d+)[,}]')  # how this package writes a step line: its number first


def _step_of(line):
    """The step number of a log line (bytes), or None for the header or a line without one. A line
    this package wrote is not parsed whole (a recorded step's line is tens of kilobytes)."""
    first = _STEP_FIRST.match(line)
    if first:
        return int(first.group(1))
    try:
        step = json.loads(line).get("step")
    except (ValueError, AttributeError):
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def cut_back(log, given, from_step=None):
    """Readies an open log for appending: cuts a torn last line (a run stopped while writing it),
    which the next line would otherwise join into one that no reader can parse, and -- for a run
    resumed at `from_step` -- the lines of the steps from there on, which the resumed run writes
    again (a log's steps increase: left there, the resumed steps would make it unreadable).
    Returns the largest step kept (-1 if none) and what was cut, in one sentence naming the log
    (None where nothing was)."""
    fd = log.fileno()
    kept, last, cut_steps, torn = 0, -1, [], 0
    with open(os.dup(fd), "rb") as raw:  # the same open file (its lock), read as bytes
        raw.seek(0)
        for line in raw:
            if not line.endswith(b"\n"):
                torn = len(line)
                break
            step = _step_of(line)
            if cut_steps or (step is not None and from_step is not None and step >= from_step):
                if step is not None:
                    cut_steps.append(step)
                continue
            last = last if step is None else max(last, step)
            kept += len(line)
    if kept < os.fstat(fd).st_size:
        os.ftruncate(fd, kept)
    os.lseek(fd, 0, os.SEEK_END)
    said = []
    if cut_steps:
        said.append(f"the lines of steps {cut_steps[0]}..{cut_steps[-1]} ({len(cut_steps)}), which the run resumed at step "
                    f"{from_step} writes again")
    if torn:
        said.append(f"a torn last line ({torn} bytes, from a run stopped while writing it)")
    return last, (f"{given}: cut before appending: " + "; and ".join(said)) if said else None
