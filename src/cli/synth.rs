//! `nsys-lens synth -o DIR --preset NAME`

use super::Outcome;
use nsys_lens::synth::{self, Faults, MpiTrace, Names, Options, Preset};
use std::path::PathBuf;

/// Kernel name sets (see `--names`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum NamesArg {
    /// 2022's names.
    #[value(name = "2022")]
    Y2022,
    /// Today's names.
    #[value(name = "2026")]
    Y2026,
    /// ROCm's names.
    Rocm,
}

/// Options of `synth`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens synth -o run --preset pithtrain --pp 2 --ep 2 --gpus-per-node 2
  nsys-lens synth -o ddp --preset ddp --nodes 2 --grad-accum 4 --mixed-precision --slow-dataloader
  nsys-lens synth -o big --preset ddp --nodes 1 --gpus-per-node 1 --steps 4000
  nsys-lens synth -o deep --preset ddp --nodes 1 --launch-ahead 50 --name-variety 200
  nsys-lens synth -o torch --preset ddp --format kineto   rank<N>.json as torch.profiler writes")]
pub struct Args {
    /// Directory to write node<i>.sqlite (or rank<N>.json) into (created if missing).
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,

    /// What to write: nsys exports (one per node), or torch.profiler (Kineto) traces (one
    /// JSON per rank, made from the same run).
    #[arg(long, value_enum, default_value_t)]
    format: SynthFormat,

    /// The workload.
    #[arg(long, value_enum)]
    preset: PresetArg,

    /// Nodes (ddp, fsdp; pithtrain and megatron derive it from the mesh).
    #[arg(long, default_value_t = 2)]
    nodes: usize,

    /// GPUs (ranks) per node (default: 2; for a pithtrain or megatron mesh of an odd number of
    /// ranks, the largest number up to 8 that divides it, so every mesh fills whole nodes).
    #[arg(long)]
    gpus_per_node: Option<usize>,

    /// Pipeline-parallel size (pithtrain, megatron).
    #[arg(long, default_value_t = 2)]
    pp: usize,

    /// Data-parallel size (pithtrain, megatron).
    #[arg(long, default_value_t = 1)]
    dp: usize,

    /// Context-parallel size (pithtrain).
    #[arg(long, default_value_t = 1)]
    cp: usize,

    /// Expert-parallel size (pithtrain).
    #[arg(long, default_value_t = 2)]
    ep: usize,

    /// Tensor-parallel size (megatron).
    #[arg(long, default_value_t = 1)]
    tp: usize,

    /// Chunks (pithtrain) or micro-batches (megatron) per step.
    #[arg(long, default_value_t = 6)]
    chunks: usize,

    /// Transformer layers per rank.
    #[arg(long, default_value_t = 2)]
    layers: usize,

    /// Training steps (multiplies the workload).
    #[arg(long, default_value_t = 1)]
    steps: usize,

    /// Micro-batches per optimizer step (ddp).
    #[arg(long, default_value_t = 1)]
    grad_accum: usize,

    /// bf16 GEMMs and all-reduces instead of fp32 (ddp, fsdp, megatron; pithtrain is bf16).
    #[arg(long)]
    mixed_precision: bool,

    /// Whose kernel names to write: 2022 (cuBLAS sm90_xmma_gemm_*, FlashAttention 2, PyTorch's
    /// eager kernels), 2026 (cuBLASLt nvjet_*, FlashAttention 3, Inductor's triton_*) or rocm
    /// (Tensile Cijk_*, Composable Kernel's FMHA); truth.json gives each rank's families.
    #[arg(long, value_enum, default_value = "2022")]
    names: NamesArg,

    /// A 45 ms host-side data-loading gap before each step (ddp).
    #[arg(long)]
    slow_dataloader: bool,

    /// Serialise collectives with compute (fsdp).
    #[arg(long)]
    no_overlap: bool,

    /// Launch communication on the compute stream instead of its own streams (every preset).
    #[arg(long)]
    nccl_on_compute: bool,

    /// Number every process's streams its own way, as real processes do (rank r's streams
    /// shifted by r, an odd rank's in reverse order): nothing may rest on stream ids agreeing
    /// across processes.
    #[arg(long)]
    renumber_streams: bool,

    /// Record OS runtime calls (`OSRT_API`, as `nsys profile --trace=osrt`): the host's waits
    /// in the OS, such as ddp's data loader in `pthread_cond_wait` (`--slow-dataloader`).
    #[arg(long)]
    osrt: bool,

    /// Sample GPU metrics every 100 us (`GPU_METRICS`, as `--gpu-metrics-devices=all`): SM and
    /// tensor activity and DRAM bandwidth follow the compute kernels, NVLink the communication.
    #[arg(long)]
    gpu_metrics: bool,

    /// Record device-memory allocations (`CUDA_GPU_MEMORY_USAGE_EVENTS`, as
    /// `--cuda-memory-usage=true`): the model's 8 GiB before the first kernel, 2 GiB of
    /// activations allocated at each step's start and released at its end.
    #[arg(long)]
    memory_usage: bool,

    /// Launch every compute kernel as a one-node CUDA graph, traced as whole graphs
    /// (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`, nsys's default `--cuda-graph-trace=graph`); the
    /// timing is the same as without.
    #[arg(long, conflicts_with = "cuda_graph_nodes")]
    cuda_graphs: bool,

    /// Launch every compute kernel as a one-node CUDA graph, traced node by node (the kernels
    /// carry their `graphNodeId`, as with `--cuda-graph-trace=node`).
    #[arg(long)]
    cuda_graph_nodes: bool,

    /// Make the ranks MPI processes (`--trace=mpi`): `MPI_Init`, after each step a ring
    /// exchange (`MPI_Isend` to the next rank, `MPI_Irecv` from the previous, `MPI_Waitall`)
    /// and a loss `MPI_Allreduce`, `MPI_Finalize`. `tables` records them in nsys's MPI tables
    /// with `MPI_RANKS` (nsys 2023 on); `nvtx` as NVTX ranges of the `MPI` domain, names only
    /// (nsys 2022.x).
    #[arg(long, value_enum, value_name = "HOW", num_args = 0..=1, default_missing_value = "tables")]
    mpi: Option<MpiArg>,

    /// Make compute kernels and copies OpenACC directives (`--trace=openacc`): each kernel
    /// launch inside an `acc_compute_construct` holding an `acc_enqueue_launch`, each copy inside
    /// an `acc_enqueue_upload` of its bytes (`CUPTI_ACTIVITY_KIND_OPENACC_*`).
    #[arg(long)]
    openacc: bool,

    /// Give NCCL's API ranges the extended payloads NCCL 2.23 and later record (message size,
    /// reduction operation), as `nsys export --include-json=true` writes them (`jsonText`).
    #[arg(long)]
    nccl_payloads: bool,

    /// The GPU runs this many milliseconds behind the CPU: each operation starts at least MS
    /// after its launch returned, as with a deep launch queue in real training.
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    launch_ahead: f64,

    /// Each compute kernel kind comes in N variants of its name, grid and block (`gemm_v7`),
    /// as templated kernels do: the name variety of real captures, for benchmarks.
    #[arg(long, value_name = "N", default_value_t = 1)]
    name_variety: u32,

    /// Write no framework NVTX (rank label, steps, stages, PyTorch names), only NCCL's own
    /// ranges (every preset).
    #[arg(long)]
    no_framework_nvtx: bool,

    /// nsys exports carry PyTorch's shape NVTX around every GEMM's and attention kernel's
    /// launch (`aten::mm, seq = N, op_id = N, sizes = [[M, K], [K, N]]`, as `nsys profile
    /// --pytorch=autograd-shapes-nvtx` records it), for `mfu`; torch.profiler traces
    /// (`--format kineto`) always record shapes; truth.json gives each operator's FLOPs.
    #[arg(long)]
    shape_nvtx: bool,

    /// One rank that arrives late at every collective: RANK:NS starts each of its collectives
    /// NS later (its compute before them runs longer); truth.json says who was last, by how much.
    #[arg(long, value_name = "RANK:NS", value_parser = parse_straggler)]
    straggler: Option<(usize, i64)>,

    /// One rank whose compute (kernels, copies, sets) takes FACTOR times as long (1.3: 30 %
    /// slower), for `critical-path` and `what-if`.
    #[arg(long, value_name = "RANK:FACTOR", value_parser = parse_slow_rank)]
    slow_rank: Option<(usize, f64)>,

    /// Every rank's kernels of a family (or group: `gemm`), or transfers of a communication
    /// role (`nccl:AllReduce`), take FACTOR times as long (repeatable): the run `what-if
    /// --change family=NAME*FACTOR` (or `role=NAME*FACTOR`) predicts.
    #[arg(long, value_name = "NAME=FACTOR", value_parser = parse_scale_family)]
    scale_family: Vec<(String, f64)>,

    /// One rank whose launching thread works NS more before each launch (a launch-bound CPU).
    #[arg(long, value_name = "RANK:NS", value_parser = parse_straggler)]
    launch_bound: Option<(usize, i64)>,

    /// How far apart (ns) consecutive nodes' sessions started.
    #[arg(long, default_value_t = 37_251_904)]
    session_gap: i64,

    /// Node i's clock reads i x NS ahead of true time (to test --align collectives).
    #[arg(
        long,
        value_name = "NS",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    clock_skew: i64,

    /// Seed: the same options and seed give the same rows.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// `--format` values.
#[derive(Debug, Clone, Copy, Default, clap::ValueEnum)]
enum SynthFormat {
    /// nsys SQLite exports, `node<i>.sqlite`.
    #[default]
    Nsys,
    /// torch.profiler (Kineto) JSON, `rank<N>.json`.
    Kineto,
}

/// `--mpi` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum MpiArg {
    /// nsys's MPI tables (nsys 2023 on).
    Tables,
    /// NVTX ranges of the `MPI` domain (nsys 2022.x).
    Nvtx,
}

/// `--preset` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PresetArg {
    /// PithTrain DualPipeV MoE training (pp x dp x cp x ep ranks).
    Pithtrain,
    /// DDP fine-tuning with bucketed all-reduce.
    Ddp,
    /// Megatron TP x PP x DP, 1F1B.
    Megatron,
    /// FSDP all-gather / reduce-scatter per layer.
    Fsdp,
}

/// Without `--gpus-per-node`: 2, unless the mesh of pithtrain or megatron has a number of ranks
/// 2 does not divide; then the largest number up to 8 that does, so that they fill whole nodes.
fn default_gpus_per_node(options: &Options) -> usize {
    let world = match options.preset {
        Preset::Ddp | Preset::Fsdp => return 2,
        Preset::Pithtrain | Preset::Megatron => synth::world_size(options).max(1),
    };
    if world.is_multiple_of(2) {
        return 2;
    }
    (1..=8.min(world))
        .rev()
        .find(|g| world % g == 0)
        .unwrap_or(1)
}

/// `3:1.3` -> (3, 1.3).
fn parse_slow_rank(text: &str) -> Result<(usize, f64), String> {
    let (rank, factor) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not RANK:FACTOR"))?;
    let rank = rank.parse().map_err(|e| format!("rank `{rank}`: {e}"))?;
    let factor = factor
        .parse()
        .map_err(|e| format!("factor `{factor}`: {e}"))?;
    Ok((rank, factor))
}

/// `gemm=0.5` -> ("gemm", 0.5).
fn parse_scale_family(text: &str) -> Result<(String, f64), String> {
    let (name, factor) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=FACTOR"))?;
    let factor: f64 = factor
        .parse()
        .map_err(|e| format!("factor `{factor}`: {e}"))?;
    match factor >= 0.0 {
        true => Ok((name.to_string(), factor)),
        false => Err(format!("factor `{factor}`: must be 0 or more")),
    }
}

/// `3:2000000` -> (3, 2000000).
fn parse_straggler(text: &str) -> Result<(usize, i64), String> {
    let (rank, ns) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not RANK:NS"))?;
    let rank = rank.parse().map_err(|e| format!("rank `{rank}`: {e}"))?;
    let ns = ns.parse().map_err(|e| format!("delay `{ns}`: {e}"))?;
    Ok((rank, ns))
}

/// Writes the export and prints the files written.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let preset = match args.preset {
        PresetArg::Pithtrain => Preset::Pithtrain,
        PresetArg::Ddp => Preset::Ddp,
        PresetArg::Megatron => Preset::Megatron,
        PresetArg::Fsdp => Preset::Fsdp,
    };
    let options = Options {
        nodes: args.nodes,
        gpus_per_node: args.gpus_per_node.unwrap_or(2),
        pp: args.pp,
        dp: args.dp,
        cp: args.cp,
        ep: args.ep,
        tp: args.tp,
        chunks: args.chunks,
        layers: args.layers,
        steps: args.steps,
        grad_accum: args.grad_accum,
        mixed_precision: args.mixed_precision,
        names: match args.names {
            NamesArg::Y2022 => Names::Y2022,
            NamesArg::Y2026 => Names::Y2026,
            NamesArg::Rocm => Names::Rocm,
        },
        slow_dataloader: args.slow_dataloader,
        overlap: !args.no_overlap,
        session_gap: args.session_gap,
        clock_skew: args.clock_skew,
        nccl_on_compute: args.nccl_on_compute,
        renumber_streams: args.renumber_streams,
        osrt: args.osrt,
        gpu_metrics: args.gpu_metrics,
        memory_usage: args.memory_usage,
        cuda_graphs: args.cuda_graphs,
        cuda_graph_nodes: args.cuda_graph_nodes,
        mpi: args.mpi.map(|m| match m {
            MpiArg::Tables => MpiTrace::Tables,
            MpiArg::Nvtx => MpiTrace::Nvtx,
        }),
        openacc: args.openacc,
        nccl_payloads: args.nccl_payloads,
        launch_ahead: (args.launch_ahead * 1e6).round() as i64,
        name_variety: args.name_variety,
        framework_nvtx: !args.no_framework_nvtx,
        shape_nvtx: args.shape_nvtx,
        straggler: args.straggler,
        faults: Faults {
            slow_rank: args.slow_rank,
            scale_family: args.scale_family,
            launch_bound: args.launch_bound,
        },
        seed: args.seed,
        ..Options::new(preset)
    };
    let options = Options {
        gpus_per_node: args
            .gpus_per_node
            .unwrap_or_else(|| default_gpus_per_node(&options)),
        ..options
    };
    let generated = synth::generate(&args.output, &options)?;
    let written = match args.format {
        SynthFormat::Kineto => {
            let written = synth::kineto::write(&generated, &args.output)?;
            for export in generated.exports {
                std::fs::remove_file(export)?;
            }
            written
        }
        _ => generated.exports,
    };
    super::print_paths(&written)?;
    Ok(Outcome::Done)
}
