//! CPU side of a process: one thread track per thread with CUDA API calls, NVTX push/pop ranges
//! and marks; NVTX start/end ranges (which may overlap and cross threads) on their own tracks.

use super::Writer;
use super::lanes::Lanes;
use super::sequence::{Arg, Category, Name, Value};
use crate::classify::streams::clip;
use crate::export::Part;
use crate::export::items::{Clipped, CpuEvent, sort_nested, thread_events};
use crate::model::{NvtxEvent, NvtxKind, StringId};
use std::collections::BTreeMap;
use std::io::Write;

/// Track order under a process: threads, then NVTX ranges, GPUs, counters.
pub const NVTX_ORDER: i32 = 1_000;

/// The thread tracks of a process.
pub fn threads<W: Write>(w: &mut Writer<W>, part: &Part, pid: i32) -> anyhow::Result<()> {
    let timeline = w.scope.activity.timeline;
    let by_thread = thread_events(w.scope.activity, part, false);
    for (order, ((tid, thread), items)) in by_thread.into_iter().enumerate() {
        let name = match timeline.text(timeline.thread(thread).name) {
            "" => format!("thread [{tid}]"),
            name => format!("{name} [{tid}]"),
        };
        let uuid = w.thread_track(pid, name.clone(), order as i32)?;
        let mut lanes = Lanes::new(true);
        let first = w.sequence(uuid);
        lanes.add(first);
        let overlapping = format!("{name} · overlapping");
        emit(w, &mut lanes, &items, part, (uuid, &overlapping))?;
    }
    Ok(())
}

/// The NVTX start/end ranges of a process, one track (with lanes) per domain.
pub fn nvtx_ranges<W: Write>(
    w: &mut Writer<W>,
    part: &Part,
    process_uuid: u64,
) -> anyhow::Result<()> {
    let timeline = w.scope.activity.timeline;
    let window = part.window;
    let mut by_domain: BTreeMap<StringId, Vec<Clipped<CpuEvent>>> = BTreeMap::new();
    for e in w.scope.activity.nvtx(part.process) {
        if e.kind != NvtxKind::StartEnd {
            continue;
        }
        let end = e.end.map_or(window.1, |t| t.0);
        if let Some((start, end)) = clip((e.start.0, end), window) {
            by_domain.entry(e.domain).or_default().push(Clipped {
                start,
                end,
                what: CpuEvent::StartEnd(e),
            });
        }
    }
    for (order, (domain, mut items)) in by_domain.into_iter().enumerate() {
        sort_nested(&mut items);
        let name = match timeline.text(domain) {
            "" => "NVTX".to_string(),
            d => format!("NVTX · {d}"),
        };
        let mut lanes = Lanes::new(true);
        let track = (process_uuid, &name);
        let first = w.child(process_uuid, name.clone(), NVTX_ORDER + order as i32)?;
        lanes.add(first);
        emit(w, &mut lanes, &items, part, track)?;
    }
    Ok(())
}

/// Writes sorted items onto lanes; extra lanes are `(parent, name)` tracks.
fn emit<W: Write>(
    w: &mut Writer<W>,
    lanes: &mut Lanes,
    items: &[Clipped<CpuEvent>],
    part: &Part,
    (parent, lane_name): (u64, &String),
) -> anyhow::Result<()> {
    let texts = w.texts();
    let process = part.process;
    for item in items {
        let (start, end) = (w.scope.rebase(item.start), w.scope.rebase(item.end));
        w.counts.nvtx += u64::from(!matches!(item.what, CpuEvent::Api(_) | CpuEvent::Os(_)));
        let (event, flow) = match item.what {
            CpuEvent::Mark(e) => {
                lanes.first(&mut w.out, start)?;
                let name = (Name::Text(e.text), Category::Nvtx);
                let args = domain_arg(e);
                lanes
                    .sequence(0)
                    .instant(&mut w.out, start, name, args.as_slice(), texts)?;
                continue;
            }
            CpuEvent::Api(a) => {
                w.counts.api += 1;
                let flow = w.flows.api_flow(process, a.correlation);
                let args = vec![(Arg::Correlation, Value::Uint(a.correlation.into()))];
                ((Name::Text(a.name), Category::CudaApi, args), flow)
            }
            CpuEvent::Os(o) => {
                w.counts.os_calls += 1;
                ((Name::Text(o.name), Category::OsRuntime, Vec::new()), None)
            }
            CpuEvent::Range(e) | CpuEvent::StartEnd(e) => {
                let args = domain_arg(e).into_iter().collect();
                ((Name::Text(e.text), Category::Nvtx, args), None)
            }
        };
        let lane = match lanes.place(&mut w.out, start, end)? {
            Some(lane) => lane,
            None => {
                let seq = w.child(parent, lane_name.clone(), lanes.len() as i32)?;
                lanes.add(seq)
            }
        };
        let (name, category, args) = event;
        lanes.sequence(lane).begin(
            &mut w.out,
            start,
            (name, category),
            &args,
            flow.as_slice(),
            texts,
        )?;
        lanes.opened(lane, end);
    }
    lanes.finish(&mut w.out)?;
    Ok(())
}

/// The domain annotation of a non-default-domain NVTX event.
fn domain_arg(e: &NvtxEvent) -> Option<(Arg, Value)> {
    (e.domain != StringId::EMPTY).then_some((Arg::Domain, Value::Text(e.domain)))
}
