//! FSDP: every layer all-gathers its parameters before forward and backward and reduce-scatters
//! its gradients after backward, on their own streams, prefetched so that they overlap compute;
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
                    all_gather(p, gather);
                    for layer in 0..o.layers {
                        p.wait(streams::COMPUTE, ALL_GATHER);
                        if layer + 1 < o.layers {
                            all_gather(p, gather);
                            if !o.overlap {
                                p.wait(streams::COMPUTE, ALL_GATHER);
                            }
                        }
                        layer_forward(p, gemm, slow);
                    }
                });
                p.range("backward", |p| {
                    p.thread(Launcher::Autograd);
                    all_gather(p, gather);
                    for layer in (0..o.layers).rev() {
                        p.wait(streams::COMPUTE, ALL_GATHER);
                        if layer > 0 {
                            all_gather(p, gather);
                            if !o.overlap {
                                p.wait(streams::COMPUTE, ALL_GATHER);
                            }
                        }
                        layer_backward(p, gemm, slow);
                        p.wait(REDUCE_SCATTER, streams::COMPUTE);
                        p.comm(
                            scatter,
                            REDUCE_SCATTER,
                            &kernels::NCCL_REDUCESCATTER_BF16,
                            650_000,
                            (Call::Collective("ncclReduceScatter"), None),
                        );
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

/// Gathers the next layer's parameters once the compute stream has queued what it needs.
fn all_gather(p: &mut Program, group: GroupId) {
    p.wait(ALL_GATHER, streams::COMPUTE);
    p.comm(
        group,
        ALL_GATHER,
        &kernels::NCCL_ALLGATHER,
        420_000,
        (Call::Collective("ncclAllGather"), None),
    );
}
