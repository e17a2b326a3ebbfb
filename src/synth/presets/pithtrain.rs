//! PithTrain: DualPipeV MoE training with PP x DP x CP x EP, emitting PithTrain's NVTX strings
//! (reference: analyses.md §1.8): the rank label spanning the captured step, forward, backward
//! and overlapped F+B chunk ranges, `layerNN.stageK_x` stage ranges (stage 5 fused with the next
//! layer's stage 1), `pipeline send/recv`, and `weight chunk`.
//!
//! Stage 1 is attention (with CP ring SendRecv on its own stream when cp > 1), stage 2 the EP
//! dispatch all-to-all on the dispatch stream, stage 3 the experts, stage 4 the combine
//! all-to-all on the combine stream, stage 5 the aggregation. In an overlapped chunk the forward
//! chunk's all-to-alls run while the backward chunk computes, so they are partly hidden.

use super::{ALL_REDUCE, Mesh, PIPELINE_P2P, Workload, streams};
use crate::synth::kernels::{self, KernelKind};
use crate::synth::program::{Call, GroupId, Launcher, Program};
use crate::synth::{Names, Options};

const AXES: [&str; 4] = ["pp", "dp", "cp", "ep"];
const PP: usize = 0;
const CP: usize = 2;
const EP: usize = 3;
const DISPATCH: u32 = streams::COMM[0];
const COMBINE: u32 = streams::COMM[1];
const CP_RING: u32 = streams::COMM[2];
const PIPELINE: u32 = streams::COMM[3];
const GRAD_NORM: u32 = streams::COMM[4];

/// Forward or backward half of a chunk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Forward,
    Backward,
}

impl Pass {
    fn suffix(self) -> char {
        match self {
            Pass::Forward => 'f',
            Pass::Backward => 'b',
        }
    }
}

/// The groups one rank talks to.
struct RankGroups {
    ep: GroupId,
    cp: GroupId,
    everyone: GroupId,
    cp_size: usize,
    ep_size: usize,
    /// Whether the expert all-to-alls run through DeepEP (today's names) instead of NCCL.
    deep_ep: bool,
}

pub fn build(o: &Options) -> anyhow::Result<Workload> {
    anyhow::ensure!(o.chunks >= 2 * o.pp, "--chunks must be at least 2 x --pp");
    anyhow::ensure!(o.layers >= 1, "--layers must be at least 1");
    let mesh = Mesh::new(&[o.pp, o.dp, o.cp, o.ep]);
    let mut w = Workload::new();
    let everyone: Vec<usize> = (0..mesh.size()).collect();
    for rank in 0..mesh.size() {
        let coords = mesh.coords(rank);
        let groups = RankGroups {
            ep: w.groups.get(&mesh.along(rank, EP), "ep"),
            cp: w.groups.get(&mesh.along(rank, CP), "cp"),
            everyone: w.groups.get(&everyone, "world"),
            cp_size: o.cp,
            ep_size: o.ep,
            deep_ep: o.names == Names::Y2026,
        };
        let mut p = Program::new(o.seed, rank);
        let label = label(rank, &mesh, &coords, o);
        p.range(label, |p| {
            for _ in 0..o.steps {
                step(p, o, &groups, &mesh, rank, &mut w.channels);
            }
        });
        w.programs.push(p);
    }
    Ok(w)
}

/// `rank=N; pp=R/S dp=R/S cp=R/S ep=R/S; mbs=M seq=Q`.
fn label(rank: usize, mesh: &Mesh, coords: &[usize], o: &Options) -> String {
    let axes: Vec<String> = AXES
        .iter()
        .enumerate()
        .map(|(i, name)| format!("{name}={}/{}", coords[i], mesh.sizes[i]))
        .collect();
    format!("rank={rank}; {}; mbs=1 seq={}", axes.join(" "), o.seq_len)
}

/// One training step: the DualPipeV slots, then the gradient-norm all-reduce and the optimizer.
fn step(
    p: &mut Program,
    o: &Options,
    g: &RankGroups,
    mesh: &Mesh,
    rank: usize,
    channels: &mut crate::synth::program::Channels,
) {
    let pp_rank = mesh.coords(rank)[PP];
    let warmup = o.pp - pp_rank;
    let overlapped = o.chunks + pp_rank + 1 - 2 * o.pp;
    let (mut forward_id, mut backward_id) = (0, 0);
    p.memcpy(streams::COMPUTE, 8 << 20);
    for slot in 0..o.chunks {
        if slot < warmup {
            p.range(format!("forward chunk {forward_id} (phase0)"), |p| {
                chunk(p, o, g, Pass::Forward)
            });
            forward_id += 1;
        } else if slot < warmup + overlapped {
            let text = format!(
                "forward chunk {forward_id} (phase0) backward chunk {backward_id} (phase1)"
            );
            p.range(text, |p| overlapped_chunk(p, o, g));
            forward_id += 1;
            backward_id += 1;
        } else {
            p.range(format!("backward chunk {backward_id} (phase1)"), |p| {
                chunk(p, o, g, Pass::Backward)
            });
            p.range("weight chunk", |p| {
                for layer in 0..o.layers {
                    p.range(format!("layer{layer:02}.stage3_w"), |p| {
                        p.kernel(streams::COMPUTE, &kernels::GEMM_BF16, 150_000);
                    });
                }
            });
            backward_id += 1;
        }
        if o.pp > 1 {
            pipeline_exchange(p, mesh, rank, channels);
        }
        p.sync(streams::COMPUTE);
    }
    p.wait(GRAD_NORM, streams::COMPUTE);
    p.comm(
        g.everyone,
        GRAD_NORM,
        &kernels::NCCL_ALLREDUCE_F32,
        40_000,
        ALL_REDUCE,
    );
    p.wait(streams::COMPUTE, GRAD_NORM);
    super::optimizer(p);
    p.sync(streams::COMPUTE);
}

/// A chunk that is only forward or only backward: stages in order, waiting on each all-to-all.
fn chunk(p: &mut Program, o: &Options, g: &RankGroups, pass: Pass) {
    for layer in 0..o.layers {
        stage1(p, g, pass, layer, o.layers);
        all_to_all(p, g, pass, layer, 2);
        expert_compute(p, pass, layer);
        all_to_all(p, g, pass, layer, 4);
        p.wait(streams::COMPUTE, COMBINE);
    }
}

/// An overlapped F+B chunk: the forward chunk's all-to-alls run while the backward chunk
/// computes, and the backward's while the forward computes.
fn overlapped_chunk(p: &mut Program, o: &Options, g: &RankGroups) {
    for layer in 0..o.layers {
        stage1(p, g, Pass::Forward, layer, o.layers);
        all_to_all(p, g, Pass::Forward, layer, 2);
        stage1(p, g, Pass::Backward, layer, o.layers);
        expert_compute(p, Pass::Forward, layer);
        all_to_all(p, g, Pass::Backward, layer, 2);
        all_to_all(p, g, Pass::Forward, layer, 4);
        expert_compute(p, Pass::Backward, layer);
        all_to_all(p, g, Pass::Backward, layer, 4);
        p.wait(streams::COMPUTE, COMBINE);
    }
    p.range("loss1.backward()", |p| {
        p.kernel(streams::COMPUTE, &kernels::REDUCE, 30_000)
    });
}

/// Stage 1 (attention, router, CP ring), fused with the previous layer's stage 5 after layer 0.
fn stage1(p: &mut Program, g: &RankGroups, pass: Pass, layer: usize, layers: usize) {
    let x = pass.suffix();
    let text = match layer {
        0 => format!("layer00.stage1_{x}"),
        _ => format!(
            "layer{:02}_stage5_{x}_layer{layer:02}_stage1_{x}",
            layer - 1
        ),
    };
    let (attention, scale): (&'static KernelKind, i64) = match pass {
        Pass::Forward => (&kernels::FLASH_FWD, 1),
        Pass::Backward => (&kernels::FLASH_BWD, 2),
    };
    launching_range(p, text, pass, |p| {
        if layer > 0 {
            p.kernel(streams::COMPUTE, &kernels::ELEMENTWISE, 25_000 * scale);
        }
        p.kernel(streams::COMPUTE, &kernels::LAYER_NORM, 20_000 * scale);
        p.kernel(streams::COMPUTE, &kernels::GEMM_BF16, 120_000 * scale);
        for _ in 1..g.cp_size {
            p.wait(CP_RING, streams::COMPUTE);
            let ring = (Call::Ring, Some("cp_ring"));
            p.comm(g.cp, CP_RING, &kernels::NCCL_SENDRECV, 60_000, ring);
            p.kernel(streams::COMPUTE, attention, 90_000 * scale);
            p.wait(streams::COMPUTE, CP_RING);
        }
        p.kernel(streams::COMPUTE, attention, 140_000 * scale);
        p.kernel(streams::COMPUTE, &kernels::GEMM_BF16, 60_000 * scale);
        if g.ep_size > 1 {
            // The synchronous routing metadata exchange on the compute stream (a "barrier"
            // kernel): the host waits for the token counts before it can dispatch.
            p.comm(
                g.ep,
                streams::COMPUTE,
                &kernels::NCCL_ALLREDUCE_U32,
                15_000,
                ALL_REDUCE,
            );
            p.sync(streams::COMPUTE);
        }
    });
    if layer + 1 == layers {
        launching_range(p, format!("layer{layer:02}.stage5_{x}"), pass, |p| {
            p.kernel(streams::COMPUTE, &kernels::ELEMENTWISE, 25_000 * scale)
        });
    }
}

/// Stage 2 (dispatch) or 4 (combine): an all-to-all of the EP group on its own stream.
fn all_to_all(p: &mut Program, g: &RankGroups, pass: Pass, layer: usize, stage: u8) {
    let stream = if stage == 2 { DISPATCH } else { COMBINE };
    let text = format!("layer{layer:02}.stage{stage}_{}", pass.suffix());
    launching_range(p, text, pass, |p| {
        p.wait(stream, streams::COMPUTE);
        if g.ep_size > 1 {
            let ns = 180_000 + (p.unit() * 120_000.0) as i64;
            let (kind, call) = match (g.deep_ep, stage) {
                (true, 2) => (&kernels::DEEP_EP_DISPATCH, Call::Direct),
                (true, _) => (&kernels::DEEP_EP_COMBINE, Call::Direct),
                (false, _) => (&kernels::NCCL_SENDRECV, Call::AllToAll),
            };
            p.comm(g.ep, stream, kind, ns, (call, Some("ep_a2a")));
        }
    });
}

/// Stage 3: the experts, once the dispatch all-to-all has arrived.
fn expert_compute(p: &mut Program, pass: Pass, layer: usize) {
    let scale = if pass == Pass::Forward { 1 } else { 2 };
    let text = format!("layer{layer:02}.stage3_{}", pass.suffix());
    launching_range(p, text, pass, |p| {
        p.wait(streams::COMPUTE, DISPATCH);
        p.kernel(streams::COMPUTE, &kernels::GEMM_BF16, 150_000 * scale);
        p.kernel(streams::COMPUTE, &kernels::ELEMENTWISE, 20_000 * scale);
        p.kernel(streams::COMPUTE, &kernels::GEMM_BF16, 150_000 * scale);
    });
}

/// A stage range held by the main thread; backward work is launched from the autograd thread.
fn launching_range(p: &mut Program, text: String, pass: Pass, body: impl FnOnce(&mut Program)) {
    p.range(text, |p| {
        if pass == Pass::Backward {
            p.thread(Launcher::Autograd);
        }
        body(p);
        p.thread(Launcher::Main);
    });
}

/// `pipeline send/recv`: activations to the next stage, gradients to the previous one, and the
/// matching receives.
fn pipeline_exchange(
    p: &mut Program,
    mesh: &Mesh,
    rank: usize,
    channels: &mut crate::synth::program::Channels,
) {
    let next = mesh.neighbour(rank, PP, 1);
    let previous = mesh.neighbour(rank, PP, -1);
    p.range("pipeline send/recv", |p| {
        p.wait(PIPELINE, streams::COMPUTE);
        for peer in [next, previous].into_iter().flatten() {
            p.send(channels.get(rank, peer), PIPELINE, 70_000, PIPELINE_P2P);
        }
        for peer in [previous, next].into_iter().flatten() {
            p.recv(channels.get(peer, rank), PIPELINE, PIPELINE_P2P);
        }
        p.wait(streams::COMPUTE, PIPELINE);
    });
}
