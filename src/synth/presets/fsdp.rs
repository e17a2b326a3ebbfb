//! FSDP: every layer all-gathers its parameters before forward and backward and reduce-scatters
//! its gradients after backward, on their own streams, prefetched so that they overlap compute,
//! inside FSDP2's `FSDP::all_gather` and `FSDP::post_backward_reduce` ranges;
//! `--no-overlap` makes compute wait for each collective right away (serialised).

use super::{Workload, layer_backward, layer_forward, optimizer, precision, streams};
use crate::synth::Options;
use crate::synth::kernels;
use crate::synth::program::{Call, GroupId, Launcher, Program};

const ALL_GATHER: u32 = streams::COMM[0];
const REDUCE_SCATTER: u32 = streams::COMM[1];

pub fn build(o: &Options) -> anyhow::Result<Workload> {
    let world = super::world_size(o);
    let mut w = Workload::new();
    let everyone: Vec<usize> = (0..world).collect();
    let gather = w.groups.get(&everyone, "fsdp_ag");
    let scatter = w.groups.get(&everyone, "fsdp_rs");
    let (gemm, _, slow) = precision(o.mixed_precision);
    for rank in 0..world {
        let mut p = Program::new(o.seed, rank);
        for step in 0..o.steps {
            p.range(format!("ProfilerStep#{step}"), |p| {
                p.memcpy(streams::COMPUTE, 16 << 20);
                p.range("forward", |p| {
                    all_gather(p, gather, 0);
                    for layer in 0..o.layers {
                        p.wait(streams::COMPUTE, ALL_GATHER);
                        if layer + 1 < o.layers {
                            all_gather(p, gather, layer + 1);
                            if !o.overlap {
                                p.wait(streams::COMPUTE, ALL_GATHER);
                            }
                        }
                        layer_forward(p, gemm, slow);
                    }
                });
                p.range("backward", |p| {
                    p.thread(Launcher::Autograd);
                    all_gather(p, gather, o.layers - 1);
                    for layer in (0..o.layers).rev() {
                        p.wait(streams::COMPUTE, ALL_GATHER);
                        if layer > 0 {
                            all_gather(p, gather, layer - 1);
                            if !o.overlap {
                                p.wait(streams::COMPUTE, ALL_GATHER);
                            }
                        }
                        layer_backward(p, gemm, slow);
                        p.wait(REDUCE_SCATTER, streams::COMPUTE);
                        let reduce = format!("FSDP::post_backward_reduce (layers.{layer})");
                        p.range(reduce, |p| {
                            p.comm(
                                scatter,
                                REDUCE_SCATTER,
                                &kernels::NCCL_REDUCESCATTER_BF16,
                                650_000,
                                (Call::Collective("ncclReduceScatter"), Some("fsdp_grad")),
                            )
                        });
                        if !o.overlap {
                            p.wait(streams::COMPUTE, REDUCE_SCATTER);
                        }
                    }
                    p.thread(Launcher::Main);
                });
                p.wait(streams::COMPUTE, REDUCE_SCATTER);
                optimizer(p);
                p.sync(streams::COMPUTE);
            });
        }
        w.programs.push(p);
    }
    Ok(w)
}

/// Gathers a layer's parameters once the compute stream has queued what it needs, inside
/// FSDP2's `FSDP::all_gather (fqn)` range.
fn all_gather(p: &mut Program, group: GroupId, layer: usize) {
    p.wait(ALL_GATHER, streams::COMPUTE);
    p.range(format!("FSDP::all_gather (layers.{layer})"), |p| {
        p.comm(
            group,
            ALL_GATHER,
            &kernels::NCCL_ALLGATHER,
            420_000,
            (Call::Collective("ncclAllGather"), Some("fsdp_ag")),
        )
    });
}
