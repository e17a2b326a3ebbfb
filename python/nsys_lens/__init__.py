"""nsys-lens in Python: the analyses of the `nsys-lens` command line, as pyarrow Tables.

    import nsys_lens
    run = nsys_lens.open(["node0.sqlite", "node1.sqlite"], align="collectives")
    overlap = run.overlap().to_pandas()

Every method returns the rows of the command's `--format json`, in the same order, with the
same columns and units (integer ns, percentages in 0..100); the command's notes and context
are in the table's schema metadata (`nsys_lens.notes(table)`, `nsys_lens.context(table)`). A
column holding both numbers and text (`rank`: 0, 1, ..., `all`) is text; structured cells are
their JSON text. The work runs in Rust with the GIL released.
"""

import json as _json
import warnings as _warnings

import pyarrow as _pa

from ._native import Error, NothingFound
from ._native import Session as _Session

__all__ = ["Error", "NothingFound", "Run", "open", "notes", "context"]

_TYPES = {
    "int64": _pa.int64(),
    "float64": _pa.float64(),
    "bool": _pa.bool_(),
    "large_string": _pa.large_string(),
}


def open(paths, align="session", threads=None, export_dir=None):
    """Reads the reports of one run (SQLite exports, `.nsys-rep` reports, part files, or
    directories of them; one per node) into one timeline.

    align: "session" (each host's session start) or "collectives" (corrected from the
    collectives that span hosts). threads: readers at once (default: one per core).
    export_dir: where `.nsys-rep` reports are exported to (default: beside each).
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    paths = [str(p) for p in paths]
    export_dir = None if export_dir is None else str(export_dir)
    return Run(_Session.open(paths, align, threads, export_dir))


def notes(table):
    """The notes the command printed under its table."""
    return _json.loads(table.schema.metadata[b"notes"])


def context(table):
    """The context fields of the command's JSON (window, inputs...)."""
    return _json.loads(table.schema.metadata[b"context"])


def _ranks(ranks):
    if ranks is None or isinstance(ranks, str):
        return ranks
    if isinstance(ranks, int):
        return str(ranks)
    return ",".join(str(r) for r in ranks)


def _deprecated(old, new):
    _warnings.warn(f"nsys_lens: {old} is deprecated; use {new}, as the CLI spells it",
                   DeprecationWarning, stacklevel=3)


def _paths(options):
    for key in ("roles", "families", "output", "perfetto", "paraver"):
        if options.get(key) is not None:
            options[key] = str(options[key])
    return options


class Run:
    """One loaded run. Window options, taken by every per-rank method: `whole=True` (the whole
    capture), `anchor="REGEX"` (the median NVTX range matching it), `start=NS, end=NS` (the
    same window for every rank), `gpu_window=True` (the window's GPU projection); the default
    is the steady-state window. `ranks` selects ranks (`3`, `[0, 2]` or `"0,4-7"`); `roles` is
    a TOML file of extra role rules."""

    def __init__(self, session):
        self._session = session

    def _table(self, command, **options):
        options = {k: v for k, v in options.items() if v is not None and v is not False}
        if "ranks" in options:
            options["ranks"] = _ranks(options["ranks"])
        columns, notes_json, context_json = self._session.query(
            command, _json.dumps(_paths(options))
        )
        arrays, names = [], []
        for name, kind, rows, validity, values, offsets in columns:
            buffers = [None if validity is None else _pa.py_buffer(validity)]
            if offsets is not None:
                buffers.append(_pa.py_buffer(offsets))
            buffers.append(_pa.py_buffer(values))
            arrays.append(_pa.Array.from_buffers(_TYPES[kind], rows, buffers))
            names.append(name)
        metadata = {"notes": notes_json, "context": context_json}
        return _pa.Table.from_arrays(arrays, names=names, metadata=metadata)

    def ranks(self):
        """Which process is which rank: host, pid, GPU, mesh coordinates (`nsys-lens ranks`)."""
        return self._table("ranks")

    def windows(self, **window):
        """Each rank's window (`nsys-lens window`)."""
        return self._table("windows", **window)

    def streams(self, ranks=None, roles=None, **window):
        """The role of every CUDA stream (`nsys-lens streams`)."""
        return self._table("streams", ranks=ranks, roles=roles, **window)

    def overlap(self, ranks=None, roles=None, **window):
        """Hidden and exposed communication per rank, stage and role (`nsys-lens overlap`)."""
        return self._table("overlap", ranks=ranks, roles=roles, **window)

    def kernels(self, ranks=None, steps=None, families=None, unclassified=False, **window):
        """Time per kernel family per GPU per step (`nsys-lens kernels`), or (`unclassified=True`)
        the kernels no family names, longest first."""
        return self._table("kernels", ranks=ranks, steps=steps, families=families,
                           unclassified=unclassified, **window)

    def idle(self, ranks=None, roles=None, launch_gap=None, **window):
        """GPU idle time per stream by cause, and the longest gaps (`nsys-lens idle`)."""
        return self._table("idle", ranks=ranks, roles=roles, launch_gap=launch_gap, **window)

    def bubbles(self, ranks=None, roles=None, pp=None, micro_batches=None, **window):
        """The pipeline bubble per rank and step (`nsys-lens bubbles`)."""
        return self._table(
            "bubbles", ranks=ranks, roles=roles, pp=pp, micro_batches=micro_batches, **window
        )

    def collectives(self, ranks=None, by=None, top=None, p2p=False, by_rank=None, **window):
        """Every collective matched across its ranks, or (`by="rank"`) totals per rank
        (`nsys-lens collectives`). `by_rank=True` is the deprecated spelling of `by="rank"`."""
        if by_rank is not None:
            _deprecated("by_rank=True", 'by="rank"')
            by = by or ("rank" if by_rank else None)
        return self._table("collectives", ranks=ranks, by=by, top=top, p2p=p2p, **window)

    def mfu(self, ranks=None, peak_tflops=None, model_flops_per_step=None, **window):
        """FLOPs, achieved TFLOP/s and MFU per rank, step and kernel family (`nsys-lens mfu`),
        from the shapes torch.profiler records (`record_shapes=True`)."""
        return self._table("mfu", ranks=ranks, peak_tflops=peak_tflops,
                           model_flops_per_step=model_flops_per_step, **window)

    def critical_path(self, ranks=None, roles=None, **window):
        """Each step's critical path across ranks: per step, rank, category and name, the time
        on the path (`nsys-lens critical-path`)."""
        return self._table("critical_path", ranks=ranks, roles=roles, **window)

    def what_if(self, changes, roles=None, **window):
        """Each step's measured time beside the time a replay with `changes` predicts
        (`nsys-lens what-if`): a list of `--change` specs, such as
        `["straggler=median"]` or `["family=gemm*0.5", "launch=0"]`."""
        if isinstance(changes, str):
            changes = [changes]
        return self._table("what_if", changes=list(changes), roles=roles, **window)

    def metrics(self, ranks=None, **window):
        """GPU metrics per rank over its window (`nsys-lens metrics`)."""
        return self._table("metrics", ranks=ranks, **window)

    def convert(self, output=None, to=("perfetto", "paraver"), compress=False, ranks=None,
                roles=None, steady=False, collective_flows=False, memory_budget=None,
                perfetto=None, paraver=None, gzip=None, **window):
        """Writes the run's traces as `nsys-lens convert` does, byte for byte: `output` (`-o`: the
        path without extension, default the first report's stem in the current directory),
        `to` (`--to`: "perfetto", "paraver" or both), `compress` (`--compress`: gzip the
        Perfetto trace and the .prv). The whole capture unless `steady=True` or a window is
        given. Returns what was written. `perfetto=PATH`, `paraver=BASE` and `gzip=` are the
        deprecated spellings."""
        if perfetto is not None or paraver is not None:
            _deprecated("perfetto=/paraver=", "output= and to=")
        if gzip is not None:
            _deprecated("gzip=", "compress=")
            compress = compress or gzip
        if isinstance(to, str):
            to = to.split(",")
        options = dict(output=output, to=list(to), compress=compress, perfetto=perfetto,
                       paraver=paraver, ranks=ranks, roles=roles, steady=steady,
                       collective_flows=collective_flows, memory_budget=memory_budget, **window)
        options = {k: v for k, v in options.items() if v is not None and v is not False}
        if "ranks" in options:
            options["ranks"] = _ranks(options["ranks"])
        return _json.loads(self._session.convert(_json.dumps(_paths(options))))
