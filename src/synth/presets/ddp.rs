//! DDP fine-tuning: `ProfilerStep#N` steps of forward, backward with bucketed all-reduces that
//! overlap the rest of the backward, and the optimizer. `--grad-accum N` all-reduces only on the
//! last of N micro-batches; `--mixed-precision` switches fp32 GEMMs and all-reduces to bf16;
//! `--slow-dataloader` adds a host-side gap before each step.

use super::{ALL_REDUCE, Workload, layer_backward, layer_forward, optimizer, precision, streams};
use crate::synth::Options;
use crate::synth::program::{Launcher, Program};

/// Layers per gradient bucket.
const BUCKET_LAYERS: usize = 2;
const NCCL: u32 = streams::COMM[0];

pub fn build(o: &Options) -> anyhow::Result<Workload> {
    let world = super::world_size(o);
    let mut w = Workload::new();
    let everyone: Vec<usize> = (0..world).collect();
    let group = w.groups.get(&everyone, "dp");
    let (gemm, all_reduce, slow) = precision(o.mixed_precision);
    for rank in 0..world {
        let mut p = Program::new(o.seed, rank);
        for step in 0..o.steps {
            if o.slow_dataloader {
                p.range("DataLoader.__next__", |p| {
                    p.blocked("pthread_cond_wait", 45_000_000)
                });
            }
            p.range(format!("ProfilerStep#{step}"), |p| {
                p.cpu(200_000);
                p.memcpy(streams::COMPUTE, 16 << 20);
                for micro in 0..o.grad_accum {
                    let last = micro + 1 == o.grad_accum;
                    p.range("forward", |p| {
                        for _ in 0..o.layers {
                            layer_forward(p, gemm, slow);
                        }
                    });
                    p.range("backward", |p| {
                        p.thread(Launcher::Autograd);
                        for layer in (0..o.layers).rev() {
                            layer_backward(p, gemm, slow);
                            let bucket_full = layer % BUCKET_LAYERS == 0;
                            if last && bucket_full {
                                p.wait(NCCL, streams::COMPUTE);
                                p.comm(group, NCCL, all_reduce, 900_000 * slow, ALL_REDUCE);
                            }
                        }
                        p.thread(Launcher::Main);
                    });
                }
                p.wait(streams::COMPUTE, NCCL);
                optimizer(p);
                p.memset(streams::COMPUTE, 64 << 20);
                p.sync(streams::COMPUTE);
            });
        }
        w.programs.push(p);
    }
    Ok(w)
}
