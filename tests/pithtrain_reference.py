#!/usr/bin/env python3
"""An independent re-implementation of PithTrain's analyze-nsys-profile scripts, written from
their description (../shared/reference/analyses.md §1) in their own style: SQL on the export,
then Python. tests/analyses.rs runs it beside `nsys-lens <command> --compat pithtrain` on whole
fixtures and compares the outputs byte for byte.

usage: pithtrain_reference.py ranks|window|streams|overlap EXPORT.sqlite [START END]
"""

import bisect
import re
import sqlite3
import sys

SETUP_PATTERN = re.compile(
    r"^rank=\d+; pp=\d+/\d+ dp=\d+/\d+ cp=\d+/\d+ ep=\d+/\d+; mbs=\d+ seq=\d+$"
)
STAGE = re.compile(r"stage([1-5])_([fbw])")
NEEDLES = [
    (("stage2_f", "stage2_b", "stage4_f", "stage4_b"), "ep_a2a"),
    (("stage1_f", "stage1_b"), "cp_ring"),
    (("pipeline send/recv",), "pp_p2p"),
]


def pid_of(column):
    return f"({column} / 16777216 % 16777216)"


def print_table(rows):
    columns = list(rows[0].keys())
    width = {c: max([len(c)] + [len(str(r[c])) for r in rows]) for c in columns}
    print(" ".join(c.ljust(width[c]) for c in columns))
    print(" ".join("-" * width[c] for c in columns))
    for r in rows:
        print(" ".join(str(r[c]).ljust(width[c]) for c in columns))


def setup(db):
    rows = db.execute(
        f"""
        SELECT e.pid, e.text FROM (
            SELECT {pid_of('n.globalTid')} AS pid, n.start AS start,
                   COALESCE(n.text, s.value) AS text
            FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
            WHERE n.start >= 0) e
        JOIN (SELECT {pid_of('globalTid')} AS pid, MIN(start) AS first
              FROM NVTX_EVENTS WHERE start >= 0 GROUP BY 1) f
          ON e.pid = f.pid AND e.start = f.first
        ORDER BY e.pid"""
    ).fetchall()
    records = []
    for pid, text in rows:
        fields = {}
        for token in text.split():
            if "=" in token:
                key, value = token.strip(";").split("=", 1)
                fields[key] = value
        record = {"pid": pid, "setup": text, "rank": int(fields["rank"])}
        for axis in ("pp", "dp", "cp", "ep"):
            r, s = fields[axis].split("/")
            record[axis + "_rank"], record[axis + "_size"] = int(r), int(s)
        records.append(record)
    return records


def find_window(db, pid):
    rows = db.execute(
        f"""
        SELECT n.start, n.end, COALESCE(n.text, s.value) AS text
        FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        WHERE {pid_of('n.globalTid')} = ? AND n.start >= 0
          AND COALESCE(n.text, s.value) LIKE 'forward chunk%backward chunk%'
        ORDER BY n.start""",
        (pid,),
    ).fetchall()
    return rows[len(rows) // 2]


def stream_counts(db, pid, start, end):
    return db.execute(
        f"""
        SELECT k.streamId,
               SUM(CASE WHEN s.value LIKE 'nccl%' THEN 1 ELSE 0 END),
               SUM(CASE WHEN s.value LIKE 'nccl%' THEN 0 ELSE 1 END),
               SUM(CASE WHEN s.value LIKE 'nccl%' THEN k.end - k.start ELSE 0 END),
               SUM(CASE WHEN s.value LIKE 'nccl%' THEN 0 ELSE k.end - k.start END)
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
        WHERE {pid_of('k.globalPid')} = ? AND k.start >= ? AND k.end <= ?
        GROUP BY k.streamId ORDER BY k.streamId""",
        (pid, start, end),
    ).fetchall()


def kernels(db, pid, start, end):
    return db.execute(
        f"""
        SELECT k.start, k.end, k.streamId, s.value, r.start
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
        LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.correlationId = k.correlationId
         AND {pid_of('r.globalTid')} = {pid_of('k.globalPid')}
        WHERE {pid_of('k.globalPid')} = ? AND k.start >= ? AND k.end <= ?
        ORDER BY k.start""",
        (pid, start, end),
    ).fetchall()


def innermost_nvtx(db, pid, times, scan_limit=256):
    rows = db.execute(
        f"""
        SELECT n.start, COALESCE(n.end, n.start), COALESCE(n.text, s.value)
        FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        WHERE {pid_of('n.globalTid')} = ? AND n.start >= 0
        ORDER BY n.start""",
        (pid,),
    ).fetchall()
    rows = [
        r for r in rows
        if r[2] and not SETUP_PATTERN.match(r[2]) and not r[2].startswith("nccl")
    ]
    starts = [r[0] for r in rows]
    found = []
    for t in times:
        best = None
        i = bisect.bisect_right(starts, t) - 1
        looked = 0
        while i >= 0 and looked < scan_limit:
            s, e, text = rows[i]
            if e >= t and (best is None or e - s < best[0]):
                best = (e - s, text)
            i -= 1
            looked += 1
        found.append(best[1] if best else None)
    return found


def label(text):
    if text is None:
        return "unknown"
    for needles, name in NEEDLES:
        if any(n in text for n in needles):
            return name
    return "unknown"


def windows(db, args):
    for record in setup(db):
        if len(args) == 2:
            start, end = int(args[0]), int(args[1])
        else:
            start, end, _ = find_window(db, record["pid"])
        yield record, start, end


def classify(db, args):
    out = []
    for record, start, end in windows(db, args):
        pid = record["pid"]
        for stream, n_comm, n_comp, comm_ns, comp_ns in stream_counts(db, pid, start, end):
            purpose = "compute"
            if n_comp == 0:
                ks = [k for k in kernels(db, pid, start, end) if k[2] == stream]
                names = [label(t) for t in innermost_nvtx(db, pid, [k[4] or k[0] for k in ks])]
                purpose = names[0] if names and all(n == names[0] for n in names) else (
                    "mixed" if names else "unknown")
            out.append({"pid": pid, "stream": stream, "n_comm": n_comm, "n_comp": n_comp,
                        "comm_ns": comm_ns, "comp_ns": comp_ns, "purpose": purpose})
    return out


def covered(s, e, intervals):
    """Length of [s, e) covered by the union of intervals: an endpoint sweep with counters."""
    events = [(s, 0, 1), (e, 0, -1)]
    for a, b in intervals:
        events += [(a, 1, 1), (b, 1, -1)]
    events.sort()
    active = [0, 0]
    total, last = 0, None
    for t, side, delta in events:
        if last is not None and active[0] > 0 and active[1] > 0:
            total += t - last
        active[side] += delta
        last = t
    return total


def overlap(db, args):
    out = []
    for record, start, end in windows(db, args):
        pid = record["pid"]
        counts = stream_counts(db, pid, start, end)
        comp = {c[0] for c in counts if c[2] > 0}
        comm = {c[0] for c in counts if c[2] == 0 and c[1] > 0}
        ks = kernels(db, pid, start, end)
        compute = [(k[0], k[1]) for k in ks if k[2] in comp and not k[3].startswith("nccl")]
        comm_ks = [k for k in ks if k[2] in comm]
        texts = innermost_nvtx(db, pid, [k[4] or k[0] for k in comm_ks])
        stages = {}
        for k, text in zip(comm_ks, texts):
            marks = STAGE.findall(text or "")
            if not marks:
                continue
            stage = "stage%s_%s" % marks[-1]
            dur = k[1] - k[0]
            ov = covered(k[0], k[1], compute)
            acc = stages.setdefault(stage, [0, 0, []])
            acc[0] += dur
            acc[1] += max(0, dur - ov)
            if dur > 0:
                acc[2].append(100 * ov / dur)
        for stage in sorted(stages):
            comm_ns, exposed_ns, pcts = stages[stage]
            pct = round(100 * (comm_ns - exposed_ns) / comm_ns, 2) if comm_ns else 0.0
            out.append({"pid": pid, "stage": stage, "exposed_ns": exposed_ns,
                        "overlap": f"{pct}%",
                        "overlap_min": f"{round(min(pcts), 2) if pcts else 0.0}%",
                        "overlap_max": f"{round(max(pcts), 2) if pcts else 0.0}%"})
    return out


def main():
    command, path, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    if command == "ranks":
        rows = [{"pid": r["pid"], "setup": r["setup"]} for r in setup(db)]
    elif command == "window":
        rows = []
        for r in setup(db):
            s, e, name = find_window(db, r["pid"])
            rows.append({"pid": r["pid"], "start": s, "end": e, "name": name})
    elif command == "streams":
        rows = classify(db, args)
    else:
        rows = overlap(db, args)
    print_table(rows)


if __name__ == "__main__":
    main()
