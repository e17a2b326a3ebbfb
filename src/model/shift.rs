//! Moving one host's events on the merged clock: how a clock correction (`--align collectives`)
//! is applied. Every event of every report of the host moves by the host's correction, and the
//! events are sorted again.

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
        if corrections.iter().all(|&c| c == 0) {
            return;
        }
        let process_shift: Vec<i64> = self
            .processes
            .iter()
            .map(|p| corrections[p.host.index()])
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
        let by = |span: [&mut Ns; 2], d: i64| span.into_iter().for_each(|t| t.0 += d);
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
        for s in &mut self.syncs {
            by([&mut s.start, &mut s.end], process_shift[s.process.index()]);
        }
        for n in &mut self.nvtx {
            let d = thread_shift[n.thread.index()];
            n.start.0 += d;
            if let Some(end) = &mut n.end {
                end.0 += d;
            }
        }
        for m in &mut self.memory {
            let process = self.gpus[m.gpu.index()].process;
            m.time.0 += process_shift[process.index()];
        }
        for m in &mut self.metrics {
            let report = &self.reports[self.metric_series[m.series.index()].report.index()];
            m.time.0 += corrections[report.host.index()];
        }
        for report in &mut self.reports {
            let d = corrections[report.host.index()];
            report.clock.offset += d;
            report.clock.correction += d;
            if let Some((start, end)) = &mut report.span {
                by([start, end], d);
            }
        }
        self.sort_events();
    }
}
