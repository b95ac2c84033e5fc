"""Reading trace files ahead (:class:`trajgrade.core.runfiles.TraceFiles`): the first file's bytes are read on a
thread from when the files are named, each next one while the file before it is read, never more than one file
ahead; the runs and the problems are those of reading each file in its turn.

The files here are named pipes: a writer can open one only once a reader has it open, so the test sees when
trajgrade starts reading each file, without timing anything. A command that stops before it reads (a bad graders
file) ends at once, though the pipe it was reading ahead never gets a writer.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import fixture_files

from trajgrade.core.runfiles import TraceFiles, read_runs
from trajgrade.reports.dicts import trajectory_to_dict


def _pipe(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def _feed(path: str, data: bytes) -> threading.Thread:
    """Write ``data`` into the pipe once a reader has opened it (within five seconds, or fail), on a thread."""
    deadline = time.monotonic() + 5
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            if e.errno != errno.ENXIO or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
    os.set_blocking(fd, True)

    def write() -> None:
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    return writer


def _not_opened(path: str) -> None:
    with pytest.raises(OSError) as e:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert e.value.errno == errno.ENXIO


def test_each_file_is_read_one_file_ahead_of_its_reader(tmp_path: Path) -> None:
    contents = [p.read_bytes() for p in fixture_files()[:3]]
    pipes = [_pipe(tmp_path / f"{i}.json") for i in range(3)]
    files = iter(TraceFiles(pipes))
    _feed(pipes[0], contents[0]).join()  # opened before anything asked for it
    _not_opened(pipes[1])
    taken = 0
    for i, (path, in_directory, data) in enumerate(files):
        assert (path, in_directory) == (pipes[i], False)
        writer = _feed(pipes[i + 1], contents[i + 1]) if i + 1 < len(pipes) else None  # read while this one is
        if i + 2 < len(pipes):
            _not_opened(pipes[i + 2])  # and no further
        assert data() == contents[i]
        if writer is not None:
            writer.join()
        taken += 1
    assert taken == len(pipes)


def test_runs_read_ahead_are_the_runs_read_in_turn(tmp_path: Path) -> None:
    paths = fixture_files()[:3]
    pipes = [_pipe(tmp_path / f"{i}.json") for i in range(len(paths))]
    missing = str(tmp_path / "missing.json")
    files = TraceFiles([missing, *pipes])
    writers = [threading.Thread(target=lambda i=i: _feed(pipes[i], paths[i].read_bytes()).join()) for i in range(3)]
    for w in writers:
        w.start()
    ahead, problems_ahead = read_runs(files)
    for w in writers:
        w.join()
    in_turn, problems = read_runs([missing, *map(str, paths)])
    assert [trajectory_to_dict(r.trajectory) for r in ahead] == [trajectory_to_dict(r.trajectory) for r in in_turn]
    assert len(ahead) >= 3
    assert problems_ahead == problems and problems[0].startswith(f"{missing}: cannot read: ")


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        (["grade", "--config", "{config}"], "graders[0].type: unknown grader type 'nope'"),
        (["compare", "--max-increase", "speed=1", "{config}"], "--max-increase 'speed=1': use METRIC=FRACTION"),
    ],
)
def test_a_command_that_stops_before_reading_its_files_ends_at_once(
    tmp_path: Path, command: list[str], problem: str
) -> None:
    config = tmp_path / "graders.yaml"
    config.write_text("graders:\n  - type: nope\n")
    pipe = _pipe(tmp_path / "run.json")  # read ahead from the start; no writer ever opens it
    argv = [a.format(config=config) for a in command]
    done = subprocess.run(
        [str(Path(sys.executable).with_name("trajgrade")), *argv, pipe], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert problem in done.stderr and "Traceback" not in done.stderr
    _not_opened(pipe)  # the reader is gone with the process
