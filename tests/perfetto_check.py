#!/usr/bin/env python3
"""Independent checker of nsys-lens Perfetto traces.

Decodes the file with the complete upstream schema (`perfetto_trace_pb2` from the PyPI package
`perfetto`, not our curated subset), checks the invariants trace_processor relies on
(../shared/reference/perfetto.md §6, §12), and prints a JSON summary: problems found, slice
counts per category, flows, tracks, process names in order, every counter's samples, the
CUDA API slices per name, the count and sum of every unsigned argument, the count of each
value of every text argument, the ends of every synchronization link, every CPU sample's call stack per thread (resolved through the
sequence's interned callstacks, frames, function names and mappings) and each thread's
`Running` slices (count and total ns).

usage: perfetto_check.py TRACE[.gz]
exit 3 when the `perfetto` package is not installed.
"""

import gzip
import json
import sys
from collections import defaultdict

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    from google.protobuf.unknown_fields import UnknownFieldSet
except ImportError:
    sys.exit(3)

CLEARED, NEEDS = 1, 2
BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4
BOOTTIME = 6


def unknown(message):
    return len(UnknownFieldSet(message)) > 0


def main():
    path = sys.argv[1]
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    trace = pb.Trace.FromString(data)
    problems = []

    def problem(text):
        if len(problems) < 50:
            problems.append(text)

    if unknown(trace):
        problem("unknown top-level fields")

    tracks = {}  # uuid -> descriptor
    events = defaultdict(list)  # track uuid -> [(ts, order, type, packet index)]
    seq_state = {}  # sequence id -> state
    counts = defaultdict(int)
    flows = defaultdict(int)
    flow_events = defaultdict(list)  # flow id -> [(ts, categories)]
    comm_roles = defaultdict(int)
    arg_counts = defaultdict(int)
    counters = defaultdict(list)
    api_names = defaultdict(int)
    arg_sums = defaultdict(int)
    arg_texts = defaultdict(lambda: defaultdict(int))
    pids, tids = set(), set()
    rebase_offset = None
    samples = defaultdict(list)  # (pid, tid) -> [[ts, [function|module, innermost first]]]
    slice_stacks = []  # [[slice name, [function|module, innermost first]]]

    def callstack(iid, index, state):
        """A call stack through the sequence's interned tables, innermost frame first, each
        `function|module`; None (a problem) when an iid is undefined."""
        stack = state["stacks"].get(iid)
        if stack is None:
            problem(f"packet {index}: callstack iid undefined")
            return None
        frames = []
        for frame in reversed(stack):  # Perfetto lists the outermost frame first
            function, mapping = state["frames"].get(frame, (None, None))
            path = state["mappings"].get(mapping)
            if function not in state["functions"] or path is None:
                problem(f"packet {index}: frame {frame} refers to undefined iids")
                return None
            module = "/".join(state["paths"].get(p, "?") for p in path)
            frames.append(f"{state['functions'][function]}|{module}")
        return frames

    def sample_of(packet, index, state, flags):
        """Resolves a perf sample's call stack."""
        if not state["cleared"] or not flags & NEEDS:
            problem(f"packet {index}: perf sample without cleared state or NEEDS")
        frames = callstack(packet.perf_sample.callstack_iid, index, state)
        if frames is not None:
            ps = packet.perf_sample
            samples[(ps.pid, ps.tid)].append([packet.timestamp, frames])

    for index, packet in enumerate(trace.packet):
        for message in (packet, packet.track_event, packet.track_descriptor, packet.interned_data,
                        packet.perf_sample):
            if unknown(message):
                problem(f"packet {index}: unknown field in {type(message).__name__}")
        seq = packet.trusted_packet_sequence_id
        if seq == 0:
            problem(f"packet {index}: no sequence id")
            continue
        state = seq_state.setdefault(seq, {"cleared": False, "names": {}, "cats": {},
                                           "args": {}, "strings": {}, "clock": None,
                                           "default_clock": BOOTTIME, "track": None,
                                           "last": None, "functions": {}, "paths": {},
                                           "mappings": {}, "frames": {}, "stacks": {}})
        flags = packet.sequence_flags
        if flags & CLEARED:
            state.update(cleared=True, names={}, cats={}, args={}, strings={}, clock=None,
                         default_clock=BOOTTIME, track=None, functions={}, paths={},
                         mappings={}, frames={}, stacks={})
        if packet.HasField("trace_packet_defaults"):
            d = packet.trace_packet_defaults
            if d.HasField("timestamp_clock_id"):
                state["default_clock"] = d.timestamp_clock_id
            if d.track_event_defaults.HasField("track_uuid"):
                state["track"] = d.track_event_defaults.track_uuid
        if packet.HasField("clock_snapshot"):
            for clock in packet.clock_snapshot.clocks:
                if clock.clock_id >= 64:
                    state["clock"] = clock.timestamp
        # Interned data: defined in file order, never redefined differently.
        interned = packet.interned_data
        for table, entries, attr in (("names", interned.event_names, "name"),
                                     ("cats", interned.event_categories, "name"),
                                     ("args", interned.debug_annotation_names, "name"),
                                     ("strings", interned.debug_annotation_string_values, "str")):
            for e in entries:
                old = state[table].get(e.iid)
                value = getattr(e, attr)
                if old is not None and old != value:
                    problem(f"packet {index}: iid {e.iid} of {table} redefined")
                state[table][e.iid] = value
        for e in interned.function_names:
            state["functions"][e.iid] = e.str.decode("utf-8", "replace")
        for e in interned.mapping_paths:
            state["paths"][e.iid] = e.str.decode("utf-8", "replace")
        for e in interned.mappings:
            state["mappings"][e.iid] = list(e.path_string_ids)
        for e in interned.frames:
            state["frames"][e.iid] = (e.function_name_id, e.mapping_id)
        for e in interned.callstacks:
            state["stacks"][e.iid] = list(e.frame_ids)
        if packet.HasField("perf_sample"):
            sample_of(packet, index, state, flags)
            continue
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if not d.HasField("uuid"):
                problem(f"packet {index}: descriptor without uuid")
            if d.uuid in tracks and tracks[d.uuid] != d:
                problem(f"track {d.uuid} described twice differently")
            tracks[d.uuid] = d
            if d.HasField("process"):
                if not d.process.HasField("pid") or d.process.pid in pids:
                    problem(f"track {d.uuid}: process pid missing or repeated")
                pids.add(d.process.pid)
            if d.HasField("thread"):
                if not (d.thread.HasField("pid") and d.thread.HasField("tid")) or d.thread.tid in tids:
                    problem(f"track {d.uuid}: thread pid/tid missing or tid repeated")
                tids.add(d.thread.tid)
            continue
        if not packet.HasField("track_event"):
            continue
        ev = packet.track_event
        if not packet.HasField("timestamp"):
            problem(f"packet {index}: track event without timestamp")
            continue
        uses_state = ev.name_iid or ev.category_iids or ev.debug_annotations
        if (uses_state or not ev.HasField("track_uuid")) and not (flags & NEEDS):
            problem(f"packet {index}: uses incremental state without NEEDS")
        if not state["cleared"]:
            problem(f"packet {index}: sequence {seq} used before it was cleared")
        clock_id = packet.timestamp_clock_id if packet.HasField("timestamp_clock_id") \
            else state["default_clock"]
        if clock_id >= 64:
            if state["clock"] is None:
                problem(f"packet {index}: incremental clock without a snapshot")
                continue
            state["clock"] += packet.timestamp
            ts = state["clock"]
        else:
            ts = packet.timestamp
        if state["last"] is not None and ts < state["last"]:
            problem(f"packet {index}: sequence {seq} goes back in time")
        state["last"] = ts
        track = ev.track_uuid if ev.HasField("track_uuid") else state["track"]
        if track is None:
            problem(f"packet {index}: event without a track")
            continue
        if ev.name_iid and ev.name_iid not in state["names"]:
            problem(f"packet {index}: name iid {ev.name_iid} used before definition")
        cats = []
        for c in ev.category_iids:
            if c not in state["cats"]:
                problem(f"packet {index}: category iid {c} used before definition")
            cats.append(state["cats"].get(c, "?"))
        for a in ev.debug_annotations:
            if a.name_iid and a.name_iid not in state["args"]:
                problem(f"packet {index}: annotation name iid {a.name_iid} undefined")
            if a.HasField("string_value_iid") and a.string_value_iid not in state["strings"]:
                problem(f"packet {index}: string value iid {a.string_value_iid} undefined")
            arg_counts[state["args"].get(a.name_iid, "?")] += 1
            if a.HasField("uint_value"):
                arg_sums[state["args"].get(a.name_iid, "?")] += a.uint_value
            if a.HasField("string_value_iid"):
                text = state["strings"].get(a.string_value_iid, b"?").decode("utf-8", "replace")
                arg_texts[state["args"].get(a.name_iid, "?")][text] += 1
            if state["args"].get(a.name_iid) == "comm_role" and a.HasField("string_value_iid"):
                role = state["strings"].get(a.string_value_iid, b"?")
                comm_roles[role.decode("utf-8", "replace")] += 1
        for f in ev.flow_ids:
            flows[f] += 1
            flow_events[f].append((ts, cats))
        if "nsys_lens" in cats:
            for a in ev.debug_annotations:
                if state["args"].get(a.name_iid) == "rebase_offset_ns":
                    rebase_offset = a.int_value
        value = ev.double_counter_value if ev.HasField("double_counter_value") else ev.counter_value
        events[track].append((ts, index, ev.type, value))
        if ev.HasField("callstack_iid"):
            frames = callstack(ev.callstack_iid, index, state)
            if frames is not None:
                slice_stacks.append([state["names"].get(ev.name_iid, "?"), frames])
        if ev.type in (BEGIN, INSTANT):
            for c in cats:
                counts[c] += 1
            if "cuda_api" in cats:
                api_names[state["names"].get(ev.name_iid, "?")] += 1

    # Tracks: every parent declared, no loops; every event's track declared.
    for uuid, d in tracks.items():
        seen, cur = set(), d
        while cur.HasField("parent_uuid") and cur.parent_uuid != 0:
            if cur.parent_uuid not in tracks:
                problem(f"track {uuid}: parent {cur.parent_uuid} not declared")
                break
            if cur.parent_uuid in seen:
                problem(f"track {uuid}: parent loop")
                break
            seen.add(cur.parent_uuid)
            cur = tracks[cur.parent_uuid]
    # Nesting per track (trace_processor sorts by (ts, file order)); counters only on counters.
    running = defaultdict(lambda: [0, 0])  # thread track -> [Running slices, ns]
    for track, evs in events.items():
        d = tracks.get(track)
        if d is None:
            problem(f"events on undeclared track {track}")
            continue
        evs.sort(key=lambda e: (e[0], e[1]))
        depth = 0
        is_counter = d.HasField("counter")
        opened = None
        for ts, index, kind, value in evs:
            if d.name == "thread state" and kind in (BEGIN, END):
                if kind == BEGIN:
                    opened = ts
                else:
                    running[d.parent_uuid][0] += 1
                    running[d.parent_uuid][1] += ts - opened
            if is_counter != (kind == COUNTER):
                problem(f"packet {index}: event type {kind} on track {track} (counter={is_counter})")
            if kind == BEGIN:
                depth += 1
                if depth > 512:
                    problem(f"packet {index}: nesting deeper than 512 on track {track}")
            elif kind == END:
                depth -= 1
                if depth < 0:
                    problem(f"packet {index}: END without an open slice on track {track}")
                    depth = 0
            elif kind == COUNTER:
                counters[track].append([ts, value])
        if depth != 0:
            problem(f"track {track}: {depth} slice(s) never end")
    for f, n in flows.items():
        if n < 2:
            problem(f"flow {f} has one end")
    for uuid, d in tracks.items():
        if d.HasField("counter") and uuid not in counters:
            problem(f"counter track {d.name!r} has no sample")

    def process_of(uuid):
        cur = tracks.get(uuid)
        while cur is not None and not cur.HasField("process"):
            cur = tracks.get(cur.parent_uuid) if cur.HasField("parent_uuid") else None
        return cur.process.process_name if cur is not None else None

    processes = sorted((d for d in tracks.values() if d.HasField("process")),
                       key=lambda d: d.sibling_order_rank)
    # Sibling tracks never share a name (an overlap lane is `NAME · lane N`).
    named = [d for d in tracks.values() if d.name]
    siblings = defaultdict(int)
    for d in named:
        siblings[(d.parent_uuid, d.name)] += 1
    for (_, name), n in siblings.items():
        if n > 1:
            problem(f"{n} sibling tracks named {name!r}")
    def thread_key(d):
        """`pid P · NAME [TID]`: the thread's process's real pid (its `pid P` label)."""
        process = next((t for t in tracks.values() if t.HasField("process")
                        and t.process.pid == d.thread.pid), None)
        labels = [l for l in process.process.process_labels if l.startswith("pid ")] \
            if process is not None else []
        return f"{labels[0] if labels else '?'} · {d.thread.thread_name}"

    threads = {(d.thread.pid, d.thread.tid): thread_key(d)
               for d in tracks.values() if d.HasField("thread")}
    for key in samples:
        if key not in threads:
            problem(f"perf samples of pid/tid {key} with no thread track")
    # Synchronization links: to a `cuda_sync` instant (a host wait's return), or between two
    # GPU operations (a stream wait; collective flows only with --collective-flows).
    gpu = {"kernel", "memcpy", "memset", "cuda_graph"}
    sync_flows, gpu_flows = [], []
    for f, evs in flow_events.items():
        evs = sorted(evs)
        if len(evs) == 2 and "cuda_sync" in evs[1][1]:
            sync_flows.append([evs[0][0], evs[1][0]])
        elif len(evs) == 2 and all(gpu & set(c) for _, c in evs):
            gpu_flows.append([evs[0][0], evs[1][0]])
    summary = {
        "slice_stacks": sorted(slice_stacks),
        "sync_flows": sorted(sync_flows),
        "gpu_flows": sorted(gpu_flows),
        "samples": {threads.get(k, "?"): v for k, v in samples.items()},
        "thread_states": {thread_key(tracks[t]): v for t, v in running.items()},
        "problems": problems,
        "rebase_offset_ns": rebase_offset,
        "counts": dict(counts),
        "flows": len(flows),
        "tracks": len(tracks),
        "processes": [d.process.process_name for d in processes],
        "process_ordering": tracks[0].process_ordering if 0 in tracks else 0,
        "track_names": sorted({d.name for d in tracks.values() if d.name}),
        "counters": {f"{process_of(t)} | {tracks[t].name}": s for t, s in counters.items()},
        "comm_roles": dict(comm_roles),
        "args": dict(arg_counts),
        "arg_sums": dict(arg_sums),
        "arg_texts": {k: dict(v) for k, v in arg_texts.items()},
        "api_names": dict(api_names),
    }
    json.dump(summary, sys.stdout)


if __name__ == "__main__":
    main()
