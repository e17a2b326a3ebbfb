//! Megatron-style TP x PP x DP with the 1F1B schedule: tensor-parallel all-reduces after attention
//! and MLP, activations and gradients sent between pipeline stages (the receiver waits), the
//! warm-up and cool-down bubbles that appear with `--pp 2`, and a data-parallel gradient
//! all-reduce at the end of the step.

use super::{
    ALL_REDUCE, Mesh, PIPELINE_P2P, Workload, layer_backward, layer_forward, optimizer, precision,
    streams,
};
use crate::synth::kernels;
use crate::synth::program::Call;
use crate::synth::program::{Channels, GroupId, Launcher, Program};
use crate::synth::{Names, Options};

const PP: usize = 0;
const DP: usize = 1;
const TP: usize = 2;
const TP_STREAM: u32 = streams::COMM[0];
const PP_STREAM: u32 = streams::COMM[1];
/// Megatron-LM's point-to-point functions (`p2p_communication`), as NVTX ranges: receive and
/// send of the forward pass, then of the backward pass.
const P2P_RANGES: [&str; 4] = [
    "megatron.core.pipeline_parallel.p2p_communication.recv_forward",
    "megatron.core.pipeline_parallel.p2p_communication.send_forward",
    "megatron.core.pipeline_parallel.p2p_communication.recv_backward",
    "megatron.core.pipeline_parallel.p2p_communication.send_backward",
];
const DP_STREAM: u32 = streams::COMM[2];

/// One micro-batch's forward or backward on this stage.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Forward,
    Backward,
}

pub fn build(o: &Options) -> anyhow::Result<Workload> {
    let mesh = Mesh::new(&[o.pp, o.dp, o.tp]);
    let micro = o.chunks;
    let mut w = Workload::new();
    for rank in 0..mesh.size() {
        let stage = mesh.coords(rank)[PP];
        let tp = w.groups.get(&mesh.along(rank, TP), "tp");
        let dp = w.groups.get(&mesh.along(rank, DP), "dp");
        let mut p = Program::new(o.seed, rank);
        let warmup = (o.pp - stage - 1).min(micro);
        let mut order = vec![Pass::Forward; warmup];
        for _ in warmup..micro {
            order.extend([Pass::Forward, Pass::Backward]);
        }
        order.extend(vec![Pass::Backward; warmup]);
        for step in 0..o.steps {
            p.range(format!("ProfilerStep#{step}"), |p| {
                p.memcpy(streams::COMPUTE, 4 << 20);
                for &pass in &order {
                    micro_batch(p, o, &mesh, rank, pass, tp, &mut w.channels);
                }
                if o.dp > 1 {
                    p.wait(DP_STREAM, streams::COMPUTE);
                    let (_, all_reduce, _) = precision(o.mixed_precision);
                    p.comm(dp, DP_STREAM, all_reduce, 1_200_000, ALL_REDUCE);
                    p.wait(streams::COMPUTE, DP_STREAM);
                }
                optimizer(p);
                p.sync(streams::COMPUTE);
            });
        }
        w.programs.push(p);
    }
    Ok(w)
}

fn micro_batch(
    p: &mut Program,
    o: &Options,
    mesh: &Mesh,
    rank: usize,
    pass: Pass,
    tp: GroupId,
    channels: &mut Channels,
) {
    let (from, to) = match pass {
        Pass::Forward => (mesh.neighbour(rank, PP, -1), mesh.neighbour(rank, PP, 1)),
        Pass::Backward => (mesh.neighbour(rank, PP, 1), mesh.neighbour(rank, PP, -1)),
    };
    let (name, launcher, recv, send) = match pass {
        Pass::Forward => (
            "forward-compute",
            Launcher::Main,
            P2P_RANGES[0],
            P2P_RANGES[1],
        ),
        Pass::Backward => (
            "backward-compute",
            Launcher::Autograd,
            P2P_RANGES[2],
            P2P_RANGES[3],
        ),
    };
    if let Some(peer) = from {
        p.range(recv, |p| {
            p.recv(channels.get(peer, rank), PP_STREAM, PIPELINE_P2P)
        });
        p.wait(streams::COMPUTE, PP_STREAM);
    }
    p.range(name, |p| {
        p.thread(launcher);
        let (gemm, _, slow) = precision(o.mixed_precision);
        for _ in 0..o.layers {
            match pass {
                Pass::Forward => layer_forward(p, gemm, slow),
                Pass::Backward => layer_backward(p, gemm, slow),
            }
            if o.tp > 1 {
                p.wait(TP_STREAM, streams::COMPUTE);
                // Today's Megatron runs its tensor-parallel communication through Transformer
                // Engine's userbuffers, without NCCL.
                let (kind, call) = match o.names {
                    Names::Y2026 => (&kernels::USERBUFFERS_ALLREDUCE, (Call::Direct, None)),
                    _ => (&kernels::NCCL_ALLREDUCE_BF16, ALL_REDUCE),
                };
                p.comm(tp, TP_STREAM, kind, 120_000, call);
                p.wait(streams::COMPUTE, TP_STREAM);
            }
        }
        p.thread(Launcher::Main);
    });
    if let Some(peer) = to {
        p.range(send, |p| {
            p.wait(PP_STREAM, streams::COMPUTE);
            p.send(channels.get(rank, peer), PP_STREAM, 150_000, PIPELINE_P2P);
        });
    }
}
