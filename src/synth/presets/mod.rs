//! The workloads `synth` can generate. Each preset turns the options into one [`Program`] per
//! rank plus the communication groups they use.

mod ddp;
mod fsdp;
mod megatron;
mod pithtrain;

use super::Options;
use super::kernels::{self, KernelKind};
use super::program::{Call, Channels, Groups, Op, Program};

/// An NCCL call with the framework purpose its NVTX gives (None: no framework range says).
type Purposed = (Call, Option<&'static str>);

/// `ncclAllReduce`, for no framework purpose.
const ALL_REDUCE: Purposed = (Call::Collective("ncclAllReduce"), None);

/// The framework purpose of pipeline transfers.
const PIPELINE_P2P: Option<&str> = Some("pp_p2p");

/// The streams the presets launch on (PyTorch's default stream maps to the legacy stream 7).
pub mod streams {
    /// Compute (default stream).
    pub const COMPUTE: u32 = super::super::node::DEFAULT_STREAM;
    /// First communication stream; presets number theirs from here.
    pub const COMM: [u32; 5] = [20, 24, 28, 32, 36];
}

/// Which workload to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// PithTrain DualPipeV MoE training (PP x DP x CP x EP).
    Pithtrain,
    /// Data-parallel fine-tuning with bucketed all-reduce.
    Ddp,
    /// Megatron TP x PP x DP with a 1F1B schedule.
    Megatron,
    /// FSDP: per-layer all-gather and reduce-scatter.
    Fsdp,
}

/// Every rank's program and the groups and channels they communicate on.
pub struct Workload {
    /// One program per global rank.
    pub programs: Vec<Program>,
    /// Collective groups.
    pub groups: Groups,
    /// Point-to-point channels.
    pub channels: Channels,
}

impl Workload {
    fn new() -> Workload {
        Workload {
            programs: Vec::new(),
            groups: Groups::default(),
            channels: Channels::default(),
        }
    }

    /// Makes every rank an MPI process: `MPI_Init` first, the MPI exchange of the whole world
    /// after each `ProfilerStep#` range, `MPI_Finalize` last.
    pub fn add_mpi(&mut self) {
        let world: Vec<usize> = (0..self.programs.len()).collect();
        let group = self.groups.get(&world, "mpi");
        for program in &mut self.programs {
            let mut ops = vec![Op::MpiLocal("MPI_Init", 2_500_000)];
            let (mut depth, mut step_depth) = (0, None);
            for op in program.ops.drain(..) {
                let ends_step = match &op {
                    Op::Push(text) => {
                        depth += 1;
                        if text.starts_with("ProfilerStep#") {
                            step_depth = Some(depth);
                        }
                        false
                    }
                    Op::Pop => {
                        depth -= 1;
                        step_depth == Some(depth + 1)
                    }
                    _ => false,
                };
                ops.push(op);
                if ends_step {
                    step_depth = None;
                    ops.push(Op::MpiExchange {
                        group,
                        bytes: 1 << 20,
                    });
                }
            }
            ops.push(Op::MpiLocal("MPI_Finalize", 400_000));
            program.ops = ops;
        }
    }
}

/// How many ranks the preset needs (for `ddp` and `fsdp`, nodes x GPUs per node).
pub fn world_size(options: &Options) -> usize {
    match options.preset {
        Preset::Pithtrain => options.pp * options.dp * options.cp * options.ep,
        Preset::Megatron => options.pp * options.dp * options.tp,
        Preset::Ddp | Preset::Fsdp => options.nodes * options.gpus_per_node,
    }
}

/// Builds the programs of every rank.
pub fn build(options: &Options) -> anyhow::Result<Workload> {
    match options.preset {
        Preset::Pithtrain => pithtrain::build(options),
        Preset::Ddp => ddp::build(options),
        Preset::Megatron => megatron::build(options),
        Preset::Fsdp => fsdp::build(options),
    }
}

/// A named-axis mesh of ranks, the last axis fastest.
#[derive(Debug, Clone)]
struct Mesh {
    sizes: Vec<usize>,
}

impl Mesh {
    fn new(sizes: &[usize]) -> Mesh {
        Mesh {
            sizes: sizes.to_vec(),
        }
    }

    fn size(&self) -> usize {
        self.sizes.iter().product()
    }

    fn coords(&self, mut rank: usize) -> Vec<usize> {
        let mut coords = vec![0; self.sizes.len()];
        for (axis, &size) in self.sizes.iter().enumerate().rev() {
            coords[axis] = rank % size;
            rank /= size;
        }
        coords
    }

    fn rank(&self, coords: &[usize]) -> usize {
        coords
            .iter()
            .zip(&self.sizes)
            .fold(0, |rank, (&c, &size)| rank * size + c)
    }

    /// The ranks that differ from `rank` only along `axis`, in axis order.
    fn along(&self, rank: usize, axis: usize) -> Vec<usize> {
        let mut coords = self.coords(rank);
        (0..self.sizes[axis])
            .map(|i| {
                coords[axis] = i;
                self.rank(&coords)
            })
            .collect()
    }

    /// The neighbour of `rank` at `offset` along `axis`, if inside the mesh.
    fn neighbour(&self, rank: usize, axis: usize, offset: isize) -> Option<usize> {
        let mut coords = self.coords(rank);
        let moved = coords[axis].checked_add_signed(offset)?;
        (moved < self.sizes[axis]).then(|| {
            coords[axis] = moved;
            self.rank(&coords)
        })
    }
}

/// GEMM and all-reduce kernels for the chosen precision, and how much slower fp32 is.
fn precision(mixed: bool) -> (&'static KernelKind, &'static KernelKind, i64) {
    match mixed {
        true => (&kernels::GEMM_BF16, &kernels::NCCL_ALLREDUCE_BF16, 1),
        false => (&kernels::GEMM_FP32, &kernels::NCCL_ALLREDUCE_F32, 3),
    }
}

/// A transformer layer's forward on the compute stream.
fn layer_forward(p: &mut Program, gemm: &'static KernelKind, slow: i64) {
    let compute = streams::COMPUTE;
    p.kernel(compute, &kernels::LAYER_NORM, 25_000);
    p.kernel(compute, gemm, 180_000 * slow);
    p.kernel(compute, &kernels::FLASH_FWD, 220_000);
    p.kernel(compute, gemm, 90_000 * slow);
    p.kernel(compute, &kernels::ELEMENTWISE, 30_000);
    p.kernel(compute, gemm, 260_000 * slow);
    p.kernel(compute, &kernels::ELEMENTWISE, 40_000);
    p.kernel(compute, gemm, 260_000 * slow);
}

/// A transformer layer's backward on the compute stream (about twice the forward).
fn layer_backward(p: &mut Program, gemm: &'static KernelKind, slow: i64) {
    let compute = streams::COMPUTE;
    p.kernel(compute, gemm, 500_000 * slow);
    p.kernel(compute, &kernels::ELEMENTWISE, 45_000);
    p.kernel(compute, gemm, 500_000 * slow);
    p.kernel(compute, &kernels::FLASH_BWD, 520_000);
    p.kernel(compute, gemm, 180_000 * slow);
    p.kernel(compute, &kernels::REDUCE, 35_000);
    p.kernel(compute, &kernels::LAYER_NORM, 40_000);
}

/// The optimizer step.
fn optimizer(p: &mut Program) {
    p.range("optimizer", |p| {
        p.kernel(streams::COMPUTE, &kernels::REDUCE, 60_000);
        p.kernel(streams::COMPUTE, &kernels::OPTIMIZER, 450_000);
        p.kernel(streams::COMPUTE, &kernels::OPTIMIZER, 450_000);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_round_trips_and_finds_groups() {
        let mesh = Mesh::new(&[2, 1, 1, 2]);
        assert_eq!(mesh.size(), 4);
        assert_eq!(mesh.coords(3), vec![1, 0, 0, 1]);
        assert_eq!(mesh.rank(&[1, 0, 0, 1]), 3);
        assert_eq!(mesh.along(1, 3), vec![0, 1]);
        assert_eq!(mesh.along(1, 0), vec![1, 3]);
        assert_eq!(mesh.neighbour(1, 0, 1), Some(3));
        assert_eq!(mesh.neighbour(1, 0, -1), None);
    }
}
