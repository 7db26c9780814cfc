#!/usr/bin/env python3
"""Every fpscope and fpscope-gui command the documentation shows is one the programs take, and the
documentation and the sources describe the project as it is now.

Reads the shell blocks and the inline code of README.md and docs/**/*.md, and for every command
that runs `fpscope SUB ...` or `fpscope-gui ...` checks that the subcommand exists and that every
option it uses is in that command's --help. Scripts the pages name (scripts/NAME, bench/NAME) must
exist. History has its own file, CHANGELOG.md: no date, issue number of this project or ordinal
count of earlier sessions may stand in README.md, a docs page or a source file. Prints each problem and a
closing count; exits 1 on any.
"""
import pathlib
import re
import shlex
import subprocess
import sys

root = pathlib.Path(sys.argv[1])
fpscope, gui = sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
pages = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
help_cache = {}


def help_text(program, sub):
    key = (program, sub)
    if key not in help_cache:
        args = [program] + ([sub] if sub else []) + ["--help"]
        result = subprocess.run(args, capture_output=True, text=True)
        help_cache[key] = result.stdout + result.stderr if result.returncode == 0 else None
    return help_cache[key]


def commands(page):
    """(line number, text) of the command lines in the page's code blocks and README's table."""
    lines = page.read_text().split("\n")
    inside, fence_ok = False, False
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if not inside:
                inside, fence_ok = True, line.strip() in ("```", "```sh", "```console", "```bash")
            else:
                inside = False
            continue
        if inside and fence_ok:
            yield number, line
        elif not inside:
            # Inline code that runs a command: `fpscope train --steps 20`, `fpscope-gui --follow run.jsonl`.
            for span in re.findall(r"`((?:build/(?:cli|gui)/)?fpscope(?:-gui)? [^`]+)`", line):
                yield number, span


problems, checked, failed_commands = [], 0, 0
for page in pages:
    for number, line in commands(page):
        text = re.sub(r"^\$ ", "", line.strip())
        text = text.split(" #")[0].strip()
        for script in re.findall(r"(?:\./)?((?:scripts|bench)/[A-Za-z0-9_.-]+)", text):
            if not (root / script).exists():
                problems.append(f"{page.relative_to(root)}:{number}: {script} does not exist")
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", text):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            if not words:
                continue
            name = pathlib.PurePath(words[0]).name
            if name == "fpscope" and len(words) > 1 and not words[1].startswith("-"):
                program, sub, rest = fpscope, words[1], words[2:]
            elif name == "fpscope-gui" and gui:
                program, sub, rest = gui, "", words[1:]
            else:
                continue
            checked += 1
            before = len(problems)
            where = f"{page.relative_to(root)}:{number}"
            known = help_text(program, sub)
            if known is None:
                problems.append(f"{where}: '{name} {sub}' is not a command ({text})")
                failed_commands += 1
                continue
            for word in rest:
                if not word.startswith("-") or word in ("-", "--") or re.match(r"^-[0-9.]", word):
                    continue
                option = word.split("=")[0]
                if not re.search(r"(^|[\s,])" + re.escape(option) + r"([\s,=]|$)", known, re.M):
                    problems.append(f"{where}: {name} {sub} has no option {option} ({text})")
            failed_commands += len(problems) > before

# History: dates, issue numbers and ordinal sessions in the pages and the sources (another project's
# issue, named with it, is a reference).
date = re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b")
issue = re.compile(r"(?<!oneDNN )(?<!PyTorch )\b[Ii]ssue [0-9]+|\b(?:first|second|third|[a-z]+th) (?:session|round of work)\b", re.I)
sources = [p for folder in ("core", "analyzer", "gpu", "cli", "gui", "python", "samples", "tests", "bench", "scripts")
           for p in sorted((root / folder).rglob("*"))
           if p.is_file() and "fuzz/corpus" not in str(p) and "fuzz/regressions" not in str(p)
           and (p.suffix in (".cpp", ".hpp", ".cu", ".cuh", ".inl", ".py", ".sh", ".txt", ".cmake") or p.parent.name == "scripts")]
history_lines = 0
for path in pages + sources:
    for number, line in enumerate(path.read_text(errors="replace").split("\n"), 1):
        if path.name == "docs_commands.py":
            continue
        found = date.search(line) or issue.search(line)
        if found:
            history_lines += 1
            problems.append(f"{path.relative_to(root)}:{number}: history belongs in CHANGELOG.md: '{found.group(0)}'")
failed_commands += history_lines

for problem in problems:
    print("FAIL " + problem)
print(f"documented commands: {checked - failed_commands} passed, {failed_commands} failed")
sys.exit(1 if problems else 0)
