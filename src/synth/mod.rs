//! A generator of realistic nsys SQLite exports of distributed training, one file per node, for
//! tests, benchmarks and demos (there is no GPU and no `nsys` where nsys-lens is developed).
//!
//! Files follow nsys 2026.2.1 (export schema 3.25.0) exactly: tables, columns, declared types and
//! NOT NULL flags (through [`crate::nsys::write`]), lazily created tables, dense `StringIds`, `globalTid` encoding,
//! correlation ids numbered per process (so they repeat across processes), runtime names with
//! version suffixes, NCCL kernels launched through `cuLaunchKernelEx` inside NCCL-domain NVTX
//! ranges, and times relative to each node's own session start.
//!
//! A preset ([`Preset`]) writes one `program::Program` per rank; `sim` runs them on one
//! clock, coupling collectives and point-to-point transfers across ranks and nodes.

mod causes;
mod kernels;
pub use kernels::Names;
pub mod kineto;
mod memory;
mod metrics;
mod node;
mod operators;
mod presets;
mod program;
mod rng;
mod sim;
mod truth;

pub use presets::{Preset, world_size};

use anyhow::{Context, Result, ensure};
use node::{NCCL_DOMAIN, NodeExport, NodeSpec, NvtxText};
use sim::Placement;
use std::path::{Path, PathBuf};

/// Faults to inject, each a known cost on a known rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// (rank, factor): that rank's compute (kernels, copies, sets) takes `factor` times as long.
    pub slow_rank: Option<(usize, f64)>,
    /// (family or group, factor): every rank's operations of that family take `factor` times as
    /// long (`gemm` is every `gemm_*` family).
    pub scale_family: Vec<(String, f64)>,
    /// (rank, ns): that rank's launching thread works `ns` more before each launch.
    pub launch_bound: Option<(usize, i64)>,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Options {
    /// The workload.
    pub preset: Preset,
    /// Nodes (`ddp`, `fsdp`; the other presets derive it from the mesh).
    pub nodes: usize,
    /// GPUs (ranks) per node.
    pub gpus_per_node: usize,
    /// Pipeline-parallel size.
    pub pp: usize,
    /// Data-parallel size (`pithtrain`, `megatron`).
    pub dp: usize,
    /// Context-parallel size (`pithtrain`).
    pub cp: usize,
    /// Expert-parallel size (`pithtrain`).
    pub ep: usize,
    /// Tensor-parallel size (`megatron`).
    pub tp: usize,
    /// Chunks (`pithtrain`) or micro-batches (`megatron`) per step.
    pub chunks: usize,
    /// Transformer layers per rank.
    pub layers: usize,
    /// Training steps.
    pub steps: usize,
    /// Micro-batches per optimizer step (`ddp`).
    pub grad_accum: usize,
    /// bf16 instead of fp32 GEMMs and all-reduces (`ddp`, `fsdp`, `megatron`).
    pub mixed_precision: bool,
    /// Whose kernel names the exports write.
    pub names: Names,
    /// A host-side data-loading gap before each step (`ddp`).
    pub slow_dataloader: bool,
    /// Whether collectives overlap compute (`fsdp`).
    pub overlap: bool,
    /// Sequence length written in the PithTrain rank label.
    pub seq_len: usize,
    /// How far apart (ns) consecutive nodes' sessions started.
    pub session_gap: i64,
    /// Node i's clock reads i x this many ns ahead of true time (its session start and so every
    /// time it records), while the collectives that cross nodes stay coupled in true time.
    pub clock_skew: i64,
    /// Communication launched on the compute stream instead of its own streams.
    pub nccl_on_compute: bool,
    /// Every process numbers its streams its own way (as real processes do): rank r's
    /// non-default streams are shifted by r, and an odd rank's come in reverse order.
    pub renumber_streams: bool,
    /// OS runtime calls are recorded (`OSRT_API`), as `--trace=osrt` does.
    pub osrt: bool,
    /// GPU metrics are sampled (`GPU_METRICS`), as `--gpu-metrics-devices=all` does.
    pub gpu_metrics: bool,
    /// Device-memory allocations are recorded, as `--cuda-memory-usage=true` does.
    pub memory_usage: bool,
    /// Compute kernels run as CUDA graphs traced whole (`--cuda-graph-trace=graph`).
    pub cuda_graphs: bool,
    /// Compute kernels run as CUDA graph nodes traced node by node (`--cuda-graph-trace=node`).
    pub cuda_graph_nodes: bool,
    /// The ranks make MPI calls (initialisation, a ring exchange and a loss all-reduce after
    /// each step), recorded as this says.
    pub mpi: Option<MpiTrace>,
    /// Compute kernels and copies are OpenACC directives, traced (`--trace=openacc`).
    pub openacc: bool,
    /// NCCL's API ranges carry their extended payloads, exported as JSON.
    pub nccl_payloads: bool,
    /// The GPU starts each operation at least this many ns after its launch returned: the CPU
    /// runs that far ahead, as with a deep launch queue (0: a few microseconds, as by default).
    pub launch_ahead: i64,
    /// Each compute kernel kind comes in this many variants of name, grid and block (1: one).
    pub name_variety: u32,
    /// The framework's NVTX ranges (rank label, steps, stages); NCCL's own are always written.
    pub framework_nvtx: bool,
    /// PyTorch's shape NVTX (`--pytorch=autograd-shapes-nvtx`) around every GEMM's and
    /// attention kernel's launch.
    pub shape_nvtx: bool,
    /// (rank, ns): that rank starts each of its collectives this much later (it straggles).
    pub straggler: Option<(usize, i64)>,
    /// Slower compute, scaled families, launch-bound CPUs: faults whose cost `critical-path`
    /// and `what-if` must find.
    pub faults: Faults,
    /// Seed: the same options and seed give the same rows.
    pub seed: u64,
}

impl Options {
    /// The defaults of a preset (a small 2-node run).
    pub fn new(preset: Preset) -> Options {
        Options {
            preset,
            nodes: 2,
            gpus_per_node: 2,
            pp: 2,
            dp: 1,
            cp: 1,
            ep: 2,
            tp: 1,
            chunks: 6,
            layers: 2,
            steps: 1,
            grad_accum: 1,
            mixed_precision: false,
            names: Names::default(),
            slow_dataloader: false,
            overlap: true,
            seq_len: 4096,
            session_gap: 37_251_904,
            clock_skew: 0,
            nccl_on_compute: false,
            renumber_streams: false,
            osrt: false,
            gpu_metrics: false,
            memory_usage: false,
            cuda_graphs: false,
            cuda_graph_nodes: false,
            mpi: None,
            openacc: false,
            nccl_payloads: false,
            launch_ahead: 0,
            name_variety: 1,
            framework_nvtx: true,
            shape_nvtx: false,
            straggler: None,
            faults: Faults::default(),
            seed: 1,
        }
    }
}

/// How `--trace=mpi` records MPI calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpiTrace {
    /// In `MPI_P2P_EVENTS`, `MPI_COLLECTIVES_EVENTS`, `MPI_START_WAIT_EVENTS`,
    /// `MPI_OTHER_EVENTS`, with `MPI_RANKS` (nsys 2023 and later).
    Tables,
    /// As push/pop ranges of the NVTX domain `MPI`, with names only, and the thread name
    /// `MPI Rank N` (nsys 2022.x).
    Nvtx,
}

/// UTC epoch ns of the first node's session start (2026-05-20T09:00:00Z, plus the seed's ms).
const FIRST_SESSION_UTC: i64 = 1_779_267_600_000_000_000;

/// Ranks start their captured work this long after the last node's session started.
const CAPTURE_LEAD_NS: i64 = 150_000_000;

/// A synthetic run written: its exports, and what PyTorch would have recorded of each rank's
/// collective calls (for the Kineto form).
#[derive(Debug)]
pub struct Generated {
    /// `dir/node<i>.sqlite`, in node order.
    pub exports: Vec<PathBuf>,
    /// Per rank: (host name, pid) and its calls.
    pub torch_calls: Vec<((String, u32), Vec<sim::TorchCall>)>,
    /// Per rank: (host name, pid) and the operators around its GEMM and attention launches.
    pub operators: Vec<((String, u32), Vec<operators::Operator>)>,
}

/// Writes `dir/node<i>.sqlite` for every node.
pub fn generate(dir: &Path, options: &Options) -> Result<Generated> {
    let world = presets::world_size(options);
    ensure!(world >= 1, "the mesh has no ranks");
    ensure!(
        options.gpus_per_node >= 1,
        "--gpus-per-node must be at least 1"
    );
    ensure!(
        options.steps >= 1 && options.grad_accum >= 1,
        "--steps and --grad-accum must be at least 1"
    );
    ensure!(
        world.is_multiple_of(options.gpus_per_node),
        "{world} ranks do not fill nodes of {} GPUs: change --gpus-per-node (or the mesh sizes)",
        options.gpus_per_node
    );
    if let Some((rank, ns)) = options.straggler {
        ensure!(
            rank < world && ns >= 0,
            "--straggler {rank}:{ns}: the rank must be below {world} and the delay not negative"
        );
    }
    if let Some((rank, factor)) = options.faults.slow_rank {
        ensure!(
            rank < world && factor > 0.0,
            "--slow-rank {rank}:{factor}: the rank must be below {world} and the factor above 0"
        );
    }
    ensure!(
        options.launch_ahead >= 0,
        "--launch-ahead cannot be negative"
    );
    if let Some((rank, ns)) = options.faults.launch_bound {
        ensure!(
            rank < world && ns >= 0,
            "--launch-bound {rank}:{ns}: the rank must be below {world} and the gap not negative"
        );
    }
    let node_count = world / options.gpus_per_node;
    let mut workload = presets::build(options)?;
    if options.mpi.is_some() {
        workload.add_mpi();
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let command = format!(
        "torchrun --nproc-per-node={} train.py",
        options.gpus_per_node
    );
    let mut nodes = (0..node_count)
        .map(|i| {
            let start = i as i64 * options.session_gap;
            let spec = NodeSpec {
                hostname: host_name(i),
                session_start_utc: FIRST_SESSION_UTC
                    + (options.seed % 1000) as i64 * 1_000_000
                    + start
                    + i as i64 * options.clock_skew,
                session_start: start,
                gpus: options.gpus_per_node as u32,
                gpu_name: "NVIDIA H100 80GB HBM3",
                names: options.names,
                name_variety: options.name_variety.max(1),
            };
            NodeExport::create(&dir.join(format!("node{i}.sqlite")), spec, command.clone())
        })
        .collect::<Result<Vec<_>>>()?;
    let places = place_ranks(world, options.gpus_per_node, options.renumber_streams);
    for (rank, place) in places.iter().enumerate() {
        register(&mut nodes[place.node], place, options.session_gap)?;
        if options.mpi == Some(MpiTrace::Tables) {
            nodes[place.node].mpi_rank(place.pid, rank)?;
        }
    }
    let start = (node_count as i64 - 1) * options.session_gap + CAPTURE_LEAD_NS;
    let style = sim::Style {
        nccl_on_compute: options.nccl_on_compute,
        framework_nvtx: options.framework_nvtx,
        straggler: options.straggler,
        osrt: options.osrt,
        cuda_graphs: options.cuda_graphs,
        cuda_graph_nodes: options.cuda_graph_nodes,
        mpi: options.mpi,
        openacc: options.openacc,
        nccl_payloads: options.nccl_payloads,
        launch_ahead: options.launch_ahead,
        shape_nvtx: options.shape_nvtx,
    };
    let schedules = sim::run(
        &workload.programs,
        &places,
        (&workload.groups, &workload.channels),
        &mut nodes,
        (start, options.seed),
        (style, &options.faults),
    )?;
    truth::write(dir, &schedules, &places, options.framework_nvtx)?;
    for (schedule, place) in schedules.iter().zip(&places) {
        let node = &mut nodes[place.node];
        if options.gpu_metrics {
            metrics::write(node, place.device, &schedule.kernels)?;
        }
        if options.memory_usage {
            memory::write(node, place, schedule)?;
        }
    }
    let (torch_calls, operators) = schedules
        .into_iter()
        .zip(&places)
        .map(|(s, p)| {
            let who = (host_name(p.node), p.pid);
            ((who.clone(), s.torch_calls), (who, s.operators))
        })
        .unzip();
    Ok(Generated {
        exports: nodes
            .into_iter()
            .map(NodeExport::finish)
            .collect::<Result<_>>()?,
        torch_calls,
        operators,
    })
}

/// Node `i`'s host name.
fn host_name(i: usize) -> String {
    format!("node{i}")
}

/// Rank r runs on node r / gpus_per_node, device r % gpus_per_node; pids repeat on every node;
/// with `renumber`, each numbers its streams its own way ([`Placement::stream_id`]).
fn place_ranks(world: usize, gpus_per_node: usize, renumber: bool) -> Vec<Placement> {
    (0..world)
        .map(|rank| {
            let local = (rank % gpus_per_node) as u32;
            let pid = 41_207 + 13 * local;
            Placement {
                node: rank / gpus_per_node,
                pid,
                device: local,
                autograd_tid: pid + 29,
                renumbered: renumber.then_some(rank as u32),
            }
        })
        .collect()
}

/// Adds a rank's process to its node, with NCCL's domain and communicator set-up opened before
/// the capture started (negative session times, as with `--capture-range=cudaProfilerApi`).
fn register(node: &mut NodeExport, place: &Placement, session_gap: i64) -> Result<()> {
    let session = place.node as i64 * session_gap;
    let threads = [
        (place.pid, "python3"),
        (place.autograd_tid, "pt_autograd_0"),
    ];
    node.add_process(place.pid, place.device, &threads, session - 95_000_000)?;
    let init = (session - 90_000_000, session - 31_000_000);
    let main = (place.pid, place.pid);
    node.nvtx_range(
        init,
        main,
        NvtxText::Registered("ncclCommInitRank"),
        NCCL_DOMAIN,
    )
}
