"""The Python package against the CLI it shares its code with: every table equals the command's
`--format json` row for row and value for value, with its notes and context; errors carry the
CLI's messages; `convert` writes the CLI's bytes; and the GIL is free while Rust works.

Run by `cargo test` (tests/python.rs) against the binary it built: NSYS_LENS_BIN names it.
"""

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

import nsys_lens

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ["NSYS_LENS_BIN"]
FIXTURES = ["megatron_pp2", "ddp_2node", "pithtrain_pp2_ep2"]


def cli(*args, check=True):
    out = subprocess.run([BIN, *args], capture_output=True, text=True)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def cli_json(*args):
    return json.loads(cli(*args, "--format", "json", "-q").stdout)


def same(value, expected):
    """A table cell equals the CLI's JSON value: text columns hold numbers and structured
    detail as their JSON text."""
    if isinstance(value, str) and not isinstance(expected, str):
        return value == json.dumps(expected, separators=(",", ":")) or value == str(expected)
    if isinstance(expected, float) or isinstance(value, float):
        return expected is not None and value is not None and abs(value - expected) <= 1e-9 * max(1, abs(expected))
    return value == expected


def assert_table_equals(table, doc):
    rows = table.to_pylist()
    assert len(rows) == len(doc["rows"])
    for got, want in zip(rows, doc["rows"]):
        assert sorted(got) == sorted(want)
        for key in want:
            assert same(got[key], want[key]), (key, got[key], want[key])
    assert nsys_lens.notes(table) == doc["notes"]
    context = {k: v for k, v in doc.items() if k not in ("rows", "notes")}
    assert nsys_lens.context(table) == context


CASES = [
    ("ranks", {}, []),
    ("windows", {}, ["window"]),
    ("windows", {"whole": True}, ["window", "--whole"]),
    ("streams", {}, ["streams"]),
    ("overlap", {}, ["overlap"]),
    ("overlap", {"whole": True, "ranks": [0, 1]}, ["overlap", "--whole", "--ranks", "0,1"]),
    ("kernels", {"whole": True}, ["kernels", "--whole"]),
    ("idle", {"whole": True, "launch_gap": 5000}, ["idle", "--whole", "--launch-gap", "5000"]),
    ("bubbles", {"whole": True}, ["bubbles", "--whole"]),
    ("collectives", {"whole": True}, ["collectives", "--whole"]),
    ("collectives", {"whole": True, "by": "rank"}, ["collectives", "--whole", "--by", "rank"]),
    ("kernels", {"whole": True, "unclassified": True}, ["kernels", "--whole", "--unclassified"]),
    ("collectives", {"whole": True, "top": 3}, ["collectives", "--whole", "--top", "3"]),
    ("metrics", {"whole": True}, ["metrics", "--whole"]),
    ("critical_path", {"whole": True}, ["critical-path", "--whole"]),
    ("what_if", {"whole": True, "changes": ["family=gemm*0.5", "launch=0"]},
     ["what-if", "--whole", "--change", "family=gemm*0.5", "--change", "launch=0"]),
]


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("method,options,command", CASES)
def test_every_table_equals_the_cli_json(fixture, method, options, command):
    path = ROOT / "fixtures" / fixture
    run = nsys_lens.open(path)
    command = command or ["ranks"]
    out = cli(*command, str(path), "--format", "json", "-q", check=False)
    doc = json.loads(out.stdout)
    if not doc["rows"]:
        assert out.returncode == 1, out.stderr
        with pytest.raises(nsys_lens.NothingFound):
            getattr(run, method)(**options)
        return
    assert out.returncode == 0, out.stderr
    assert_table_equals(getattr(run, method)(**options), doc)


def test_an_empty_table_is_nothing_found_as_the_cli_exit_1():
    path = ROOT / "fixtures" / "megatron_pp2"
    out = cli("metrics", "--whole", str(path), check=False)
    assert out.returncode == 1
    assert "rank  host" in out.stdout, "the empty table still prints its header"
    assert out.stderr.strip() == "nsys-lens: the table is empty: nothing to report (see its notes)"
    with pytest.raises(nsys_lens.NothingFound) as raised:
        nsys_lens.open(path).metrics(whole=True)
    message = str(raised.value)
    assert message.startswith("metrics: the table is empty: nothing to report")
    doc = json.loads(cli("metrics", "--whole", "--format", "json", str(path), check=False).stdout)
    assert doc["notes"] and all(note in message for note in doc["notes"])


def test_gpu_metrics_and_alignment(tmp_path):
    synth = cli("synth", "-o", str(tmp_path), "--preset", "ddp", "--nodes", "2",
                "--gpus-per-node", "1", "--gpu-metrics", "--clock-skew", "250000")
    assert synth.returncode == 0
    run = nsys_lens.open(tmp_path, align="collectives")
    doc = cli_json("metrics", "--whole", "--align", "collectives", str(tmp_path))
    assert_table_equals(run.metrics(whole=True), doc)
    assert len(doc["rows"]) > 0


def test_errors_are_the_cli_messages():
    path = ROOT / "fixtures" / "megatron_pp2"
    run = nsys_lens.open(path)
    with pytest.raises(nsys_lens.Error) as raised:
        run.overlap(ranks="9")
    out = cli("overlap", "--ranks", "9", str(path), check=False)
    assert out.returncode == 2
    assert out.stderr.strip() == f"nsys-lens: error: {raised.value}"
    # Without GPU work or rank labels there is no rank: nothing found (the CLI's exit 1).
    with pytest.raises(nsys_lens.Error, match="matches no NVTX range"):
        run.overlap(anchor="^no such range$")
    with pytest.raises(nsys_lens.Error, match="not a SQLite|cannot read|No such file"):
        nsys_lens.open(ROOT / "README.md")
    assert issubclass(nsys_lens.NothingFound, nsys_lens.Error)


def test_nothing_found_is_the_cli_exit_code_1(tmp_path):
    import shutil
    import sqlite3
    report = tmp_path / "cpu_only.sqlite"
    shutil.copy(ROOT / "fixtures" / "megatron_pp1" / "node0.sqlite", report)
    with sqlite3.connect(report) as db:
        tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table in tables:
            if table.startswith("CUPTI_ACTIVITY_KIND_") and table != "CUPTI_ACTIVITY_KIND_RUNTIME":
                db.execute(f"DELETE FROM {table}")
        db.execute("DELETE FROM NVTX_EVENTS WHERE domainId = 0")
    with pytest.raises(nsys_lens.NothingFound) as raised:
        nsys_lens.open(report).ranks()
    out = cli("ranks", str(report), check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == f"nsys-lens: {raised.value}"


@pytest.mark.parametrize("fixture", ["megatron_pp2", "pithtrain_pp2_ep2"])
def test_convert_writes_the_cli_bytes(fixture, tmp_path):
    path = ROOT / "fixtures" / fixture
    cli("convert", "-q", "-o", str(tmp_path / "cli"), str(path))
    written = nsys_lens.open(path).convert(output=tmp_path / "py")
    assert written["perfetto"]["counts"]["kernels"] > 0
    for ext in ["perfetto-trace", "prv", "pcf", "row"]:
        assert (tmp_path / f"cli.{ext}").read_bytes() == (tmp_path / f"py.{ext}").read_bytes(), ext


def test_python_spells_options_as_the_cli_and_warns_on_the_old_names(tmp_path, monkeypatch):
    path = ROOT / "fixtures" / "megatron_pp2"
    run = nsys_lens.open(path)
    # `--to perfetto --compress`, and the default output: the first input's stem, here.
    monkeypatch.chdir(tmp_path)
    cli("convert", "-q", "--to", "perfetto", "--compress", "-o", str(tmp_path / "cli"), str(path))
    written = run.convert(to="perfetto", compress=True)
    assert written["perfetto"]["path"] == "megatron_pp2.perfetto-trace.gz"
    assert "paraver" not in written
    assert (tmp_path / "megatron_pp2.perfetto-trace.gz").read_bytes() == \
        (tmp_path / "cli.perfetto-trace.gz").read_bytes()
    with pytest.raises(nsys_lens.Error, match="is not"):
        run.convert(to="chrome")
    # The old spellings still work, with a DeprecationWarning naming the new one.
    with pytest.warns(DeprecationWarning, match="use output= and to="):
        old = run.convert(perfetto=tmp_path / "old.perfetto-trace.gz", gzip=True)
    assert (tmp_path / "old.perfetto-trace.gz").read_bytes() == \
        (tmp_path / "cli.perfetto-trace.gz").read_bytes()
    assert old["perfetto"]["bytes"] == written["perfetto"]["bytes"]
    with pytest.warns(DeprecationWarning, match='use by="rank"'):
        by_rank = run.collectives(whole=True, by_rank=True)
    assert by_rank.equals(run.collectives(whole=True, by="rank"))
    with pytest.raises(nsys_lens.Error, match='by must be "rank"'):
        run.collectives(whole=True, by="host")


def test_convert_never_replaces_an_input(tmp_path):
    import shutil
    report = tmp_path / "run.sqlite"
    shutil.copy(ROOT / "fixtures" / "megatron_pp2" / "node0.sqlite", report)
    before = report.read_bytes()
    with pytest.raises(nsys_lens.Error, match="input of this run"):
        nsys_lens.open(report).convert(perfetto=report)
    assert report.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sqlite"]


def test_the_gil_is_released_while_rust_reads(tmp_path):
    cli("synth", "-o", str(tmp_path), "--preset", "megatron", "--tp", "2", "--pp", "4",
        "--dp", "2", "--gpus-per-node", "8", "--steps", "8", "--chunks", "16")
    pauses = []
    done = threading.Event()

    def ticker():
        last = time.perf_counter()
        while not done.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            pauses.append(now - last)
            last = now

    thread = threading.Thread(target=ticker)
    thread.start()
    started = time.perf_counter()
    try:
        # One native call, long enough to tell: held GIL would stop the ticker for all of it.
        nsys_lens.open(tmp_path, threads=1)
    finally:
        took = time.perf_counter() - started
        done.set()
        thread.join()
    assert took > 0.05, "too quick to tell"
    assert max(pauses) < took / 2, (max(pauses), took)


def test_collective_sizes_come_from_torch_profiler_records(tmp_path):
    """torch.profiler's record_param_comms give each collective its process group, size and
    bus bandwidth, in the table as in the CLI."""
    cli("synth", "-o", str(tmp_path / "run"), "--preset", "ddp", "--format", "kineto")
    run = nsys_lens.open(tmp_path / "run", export_dir=tmp_path / "cache")
    doc = cli_json("collectives", "--whole", "--export-dir", str(tmp_path / "cache"),
                   str(tmp_path / "run"))
    table = run.collectives(whole=True)
    assert_table_equals(table, doc)
    rows = table.to_pylist()
    assert rows
    for row in rows:
        assert row["matched_by"] == "process_group"
        assert row["bytes"] > 0 and row["busbw_gbps"] > 0


def test_mfu_equals_the_cli_json():
    trace = ROOT.parent / "shared" / "real-data" / "gpu" / "torch_mlp_eager_shapes_h200.json.gz"
    if not trace.exists():
        pytest.skip("../shared/real-data is absent")
    run = nsys_lens.open(trace)
    doc = cli_json("mfu", "--whole", str(trace))
    assert_table_equals(run.mfu(whole=True), doc)
