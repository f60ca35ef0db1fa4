"""jacrl.jsonl: the one JSONL writer and reader (whole file atomically, one-line appends with
fsync under a lock, a torn last line closed or dropped on append and skipped on read, any other
bad line a one-line error naming the file and the line), UTF-8 whatever the locale, and where
its torn-line warnings point."""

from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
import sys
import threading
import time
import warnings

import pytest

from jacrl import jsonl


def test_write_then_read_keeps_order_and_unicode(tmp_path):
    recs = [{"b": 1, "a": "é→λ"}, {"x": [1, 2]}]
    p = jsonl.write(tmp_path / "d" / "f.jsonl", recs)
    assert jsonl.read(p) == recs
    assert p.read_text(encoding="utf-8").splitlines()[0] == '{"b": 1, "a": "é→λ"}'
    jsonl.write(p, recs[:1])  # replaced whole
    assert jsonl.read(p) == recs[:1] and [q.name for q in p.parent.iterdir()] == ["f.jsonl"]


def test_a_torn_last_line_is_skipped_on_read_and_dropped_on_append(tmp_path):
    p = tmp_path / "f.jsonl"
    p.write_text('{"a": 1}\n{"a": 2, "b"')  # a crash mid-write
    with pytest.warns(UserWarning, match=r"f.jsonl:2: skipped a torn last line"):
        assert jsonl.read(p) == [{"a": 1}]
    with pytest.warns(UserWarning, match="dropped a torn last line"):
        jsonl.append(p, {"a": 3})
    assert p.read_text() == '{"a": 1}\n{"a": 3}\n'
    p.write_text('{"a": 1}')  # whole, only its newline missing: closed, kept
    jsonl.append(p, {"a": 2})
    assert jsonl.read(p) == [{"a": 1}, {"a": 2}]


def test_a_bad_middle_line_is_a_one_line_error(tmp_path):
    p = tmp_path / "f.jsonl"
    p.write_text('{"a": 1}\nnope\n{"a": 2}\n')
    with pytest.raises(jsonl.JSONLError, match=r"f.jsonl:2: not JSON") as e:
        jsonl.read(p)
    assert "\n" not in str(e.value)
    p.write_text('{"a": 1}\n[1]\n')
    with pytest.raises(jsonl.JSONLError, match=r"f.jsonl:2: not a JSON object"):
        jsonl.read(p)


def _appender(path: str, who: int, n: int) -> None:
    for i in range(n):
        jsonl.append(path, {"who": who, "i": i, "pad": "x" * 5000})


def test_concurrent_appends_never_interleave(tmp_path):
    p = tmp_path / "f.jsonl"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_appender, args=(str(p), w, 100)) for w in range(3)]
    for q in procs:
        q.start()
    for q in procs:
        q.join(60)
    assert [q.exitcode for q in procs] == [0, 0, 0]
    recs = jsonl.read(p)
    assert sorted((r["who"], r["i"]) for r in recs) == [
        (w, i) for w in range(3) for i in range(100)
    ]


def _waiting_on_lock(inode: int) -> bool:
    """Whether some process waits for a lock on this inode (/proc/locks' `->` lines)."""
    with open("/proc/locks") as f:  # "1: -> FLOCK  ADVISORY  WRITE <pid> <dev>:<inode> ..."
        return any(w[1] == "->" and w[6].endswith(f":{inode}") for w in map(str.split, f))


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="reads /proc/locks")
def test_a_second_appender_waits_for_the_lock_and_never_truncates(tmp_path):
    """The test holds the lock mid-line (as a writer in the middle of its line does); a second
    appender blocks on it, and the half-written line is neither cut nor taken as torn."""
    p = tmp_path / "f.jsonl"
    p.write_text('{"a": 1}\n')
    done = threading.Event()
    with open(p, "a") as mine:
        fcntl.flock(mine, fcntl.LOCK_EX)
        mine.write('{"b": ')
        mine.flush()
        other = threading.Thread(target=lambda: (jsonl.append(p, {"c": 3}), done.set()))
        other.start()
        deadline = time.monotonic() + 30
        while not _waiting_on_lock(os.stat(p).st_ino) and time.monotonic() < deadline:
            assert not done.is_set(), "the second appender did not wait for the lock"
            time.sleep(0.01)
        assert _waiting_on_lock(os.stat(p).st_ino) and not done.is_set()
        assert p.read_text() == '{"a": 1}\n{"b": '  # nothing cut while it waits
        mine.write("2}\n")
        mine.flush()
        fcntl.flock(mine, fcntl.LOCK_UN)
    other.join(30)
    assert done.is_set()
    assert p.read_text() == '{"a": 1}\n{"b": 2}\n{"c": 3}\n'


# -- JSON Lines (jacrl.jsonl) ------------------------------------------------------------------


def test_write_and_append_make_missing_folders(tmp_path):
    jsonl.write(tmp_path / "a" / "b" / "w.jsonl", [{"k": 1}])
    jsonl.append(tmp_path / "c" / "d" / "a.jsonl", {"k": 2})
    assert jsonl.read(tmp_path / "a" / "b" / "w.jsonl") == [{"k": 1}]
    assert jsonl.read(tmp_path / "c" / "d" / "a.jsonl") == [{"k": 2}]


def test_appending_after_a_whole_last_line_warns_of_nothing(tmp_path):
    """append (`os.pread(fd, 1, size - 1)`: the file's last byte is the one checked)."""
    path = tmp_path / "r.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(3):
            jsonl.append(path, {"k": k})
    assert path.read_text() == '{"k": 0}\n{"k": 1}\n{"k": 2}\n'


def test_a_line_with_bytes_that_are_not_utf8_is_read_with_replacements(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"k": "a\xffb"}\n')
    assert jsonl.read(path) == [{"k": "a\ufffdb"}]


def test_the_last_line_start_is_found_at_offset_one_of_a_long_file(tmp_path):
    """last_line_start (`pos > 0`): a newline at offset 0 is found after a 64 KiB read."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n" + b"x" * (1 << 16))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert jsonl.last_line_start(fd, (1 << 16) + 1) == 1
    finally:
        os.close(fd)


def test_a_torn_line_warning_names_the_callers_line(tmp_path):
    """append and read warn of a torn last line at the line that called them (not in jsonl.py)."""
    path = tmp_path / "r.jsonl"
    path.write_text('{"k": 1}\n{"k": ')
    with pytest.warns(UserWarning, match="skipped a torn last line") as rec:
        here, rows = sys._getframe().f_lineno, jsonl.read(path)
    assert rows == [{"k": 1}] and (rec[0].filename, rec[0].lineno) == (__file__, here)
    with pytest.warns(UserWarning, match="dropped a torn last line") as rec:
        here, _ = sys._getframe().f_lineno, jsonl.append(path, {"k": 2})
    assert (rec[0].filename, rec[0].lineno) == (__file__, here)
    assert jsonl.read(path) == [{"k": 1}, {"k": 2}]


def test_a_torn_line_warning_never_points_into_jsonl(tmp_path):
    """The same warnings, whoever calls: never at a line of jsonl.py, however many of its own
    frames lie between (the check bench/mutation.py runs, where a trampoline of the mutation
    tool is the caller and the test above is deselected)."""
    path = tmp_path / "r.jsonl"
    path.write_text('{"k": 1}\n{"k": ')
    with pytest.warns(UserWarning, match="skipped a torn last line") as rec:
        jsonl.read(path)
    assert rec[0].filename != jsonl.__file__
    with pytest.warns(UserWarning, match="dropped a torn last line") as rec:
        jsonl.append(path, {"k": 2})
    assert rec[0].filename != jsonl.__file__


def test_records_are_written_as_utf8_whatever_the_locale(tmp_path):
    """write: the file is UTF-8 even where the locale's encoding is ASCII (a bare container
    with LC_ALL=C and neither locale coercion nor UTF-8 mode)."""
    import subprocess
    import sys

    import jacrl

    path = tmp_path / "w.jsonl"
    code = "import sys; from jacrl import jsonl; jsonl.write(sys.argv[1], [{'name': 'Jos\\u00e9'}])"
    env = {
        **os.environ,
        "LC_ALL": "C",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONUTF8": "0",
        "PYTHONPATH": os.path.dirname(os.path.dirname(jacrl.__file__)),
    }
    subprocess.run([sys.executable, "-X", "utf8=0", "-c", code, str(path)], env=env, check=True)
    assert path.read_bytes() == '{"name": "José"}\n'.encode()
    # the same call in this process too (so mutmut, which traces in-process calls, runs this
    # test for `write`'s mutants; each gets MUTANT_UNDER_TEST and this PYTHONPATH)
    jsonl.write(tmp_path / "here.jsonl", [{"name": "José"}])
    assert (tmp_path / "here.jsonl").read_bytes() == path.read_bytes()


def test_append_fsyncs_the_line_it_wrote(tmp_path, monkeypatch):
    p = tmp_path / "f.jsonl"
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.fstat(fd).st_size)  # what was on the file when it was synced
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    jsonl.append(p, {"a": 1})
    jsonl.append(p, {"b": 2})
    assert synced == [len('{"a": 1}\n'), len('{"a": 1}\n{"b": 2}\n')]
