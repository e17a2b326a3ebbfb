//! Moving reports' events on the merged clock: how a report's session offset is applied to a
//! report read on its own clock, and how a clock correction (`--align collectives`) is applied.
//! Every event of the report moves by the same amount, and the events are sorted again.

use super::{Ns, Timeline};

impl Timeline {
    /// Adds `corrections[h]` ns to every time of host `h` (one entry per host) and records it in
    /// each report's clock mapping.
    pub fn shift_hosts(&mut self, corrections: &[i64]) {
        assert_eq!(
            corrections.len(),
            self.hosts.len(),
            "one correction per host"
        );
        let by_report: Vec<i64> = self
            .reports
            .iter()
            .map(|r| corrections[r.host.index()])
            .collect();
        self.shift_reports(&by_report);
        for report in &mut self.reports {
            report.clock.correction += corrections[report.host.index()];
        }
    }

    /// Adds `deltas[r]` ns to every time of report `r` (one entry per report), adds it to the
    /// report's clock offset, and sorts the events again.
    pub fn shift_reports(&mut self, deltas: &[i64]) {
        assert_eq!(deltas.len(), self.reports.len(), "one delta per report");
        if deltas.iter().all(|&d| d == 0) {
            return;
        }
        let process_shift: Vec<i64> = self
            .processes
            .iter()
            .map(|p| deltas[p.report.index()])
            .collect();
        let stream_shift: Vec<i64> = self
            .streams
            .iter()
            .map(|s| process_shift[s.process.index()])
            .collect();
        let thread_shift: Vec<i64> = self
            .threads
            .iter()
            .map(|t| process_shift[t.process.index()])
            .collect();
        let by = |span: [&mut Ns; 2], d: i64| span.into_iter().for_each(|t| *t = t.moved(d));
        for k in &mut self.kernels {
            by([&mut k.start, &mut k.end], stream_shift[k.stream.index()]);
        }
        for m in &mut self.memcpys {
            by([&mut m.start, &mut m.end], stream_shift[m.stream.index()]);
        }
        for m in &mut self.memsets {
            by([&mut m.start, &mut m.end], stream_shift[m.stream.index()]);
        }
        for g in &mut self.graph_launches {
            by([&mut g.start, &mut g.end], stream_shift[g.stream.index()]);
        }
        for a in &mut self.api_calls {
            by([&mut a.start, &mut a.end], thread_shift[a.thread.index()]);
        }
        for o in &mut self.os_calls {
            by([&mut o.start, &mut o.end], thread_shift[o.thread.index()]);
        }
        for m in &mut self.mpi_calls {
            by([&mut m.start, &mut m.end], thread_shift[m.thread.index()]);
        }
        for a in &mut self.acc_events {
            by([&mut a.start, &mut a.end], thread_shift[a.thread.index()]);
        }
        for r in &mut self.thread_runs {
            by([&mut r.start, &mut r.end], thread_shift[r.thread.index()]);
        }
        for s in &mut self.samples {
            s.time = s.time.moved(thread_shift[s.thread.index()]);
        }
        for t in &mut self.threads {
            if let Some((start, end)) = &mut t.span {
                by([start, end], process_shift[t.process.index()]);
            }
        }
        for s in &mut self.syncs {
            by([&mut s.start, &mut s.end], process_shift[s.process.index()]);
        }
        for n in &mut self.nvtx {
            let d = thread_shift[n.thread.index()];
            n.start = n.start.moved(d);
            if let Some(end) = &mut n.end {
                *end = end.moved(d);
            }
        }
        for m in &mut self.memory {
            let process = self.gpus[m.gpu.index()].process;
            m.time = m.time.moved(process_shift[process.index()]);
        }
        for m in &mut self.metrics {
            let report = self.metric_series[m.series.index()].report;
            m.time = m.time.moved(deltas[report.index()]);
        }
        for series in &mut self.metric_series {
            let (start, end) = &mut series.span;
            by([start, end], deltas[series.report.index()]);
        }
        for (process, &d) in self.processes.iter_mut().zip(&process_shift) {
            if let Some((start, end)) = &mut process.span {
                by([start, end], d);
            }
        }
        for (report, &d) in self.reports.iter_mut().zip(deltas) {
            report.clock.offset += d;
            if let Some((start, end)) = &mut report.span {
                by([start, end], d);
            }
        }
        self.sort_events();
    }
}

impl Ns {
    /// The time moved by `d` ns; the end of time (an open range's, `i64::MAX`) stays.
    pub fn moved(self, d: i64) -> Ns {
        if self.0 == i64::MAX {
            self
        } else {
            Ns(self.0 + d)
        }
    }
}
