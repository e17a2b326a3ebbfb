//! Runs every rank's [`Program`] on one clock and writes the rows each operation produces.
//!
//! Each rank has a CPU time and a "free at" time per stream. A launch is an API call on the CPU
//! followed by the kernel once the stream is free. A [`Op::Comm`] waits until every member of its
//! group has reached its own matching operation: then all members' kernels start when each is
//! ready and end together, when the last member was ready plus the transfer time, so a receive
//! never ends before its send started and a collective ends almost together everywhere. Each
//! GPU operation is kept with what set its start ([`causes`](super::causes)).

use super::causes::{HostCall, Lane, Members, OpRef, Ran, SetBy};
use super::kernels::{KernelKind, NCCL_SENDRECV};
use super::node::{AccRow, DEFAULT_STREAM, NCCL_DOMAIN, NodeExport, NvtxText, P2pFields};
use super::operators::{Operator, Shapes};
use super::program::{Call, Channels, GroupId, Groups, Launcher, Op, Program};
use super::rng::Rng;
use super::{Faults, MpiTrace};
use crate::classify::families::{CUDA_GRAPH, MEMCPY, MEMSET, in_group};
use crate::hash::FxHashMap;
use crate::model::AccTable;
use anyhow::{Result, bail};
use std::collections::VecDeque;

/// Where a rank runs.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// Index of its node (and so of its export).
    pub node: usize,
    /// Process id (reused across nodes, as containers do).
    pub pid: u32,
    /// CUDA device ordinal.
    pub device: u32,
    /// Thread id of PyTorch's autograd thread.
    pub autograd_tid: u32,
    /// When the process numbers its streams its own way: its rank ([`Placement::stream_id`]).
    pub renumbered: Option<u32>,
}

impl Placement {
    /// The id the export gives the simulator's `stream`: the same, or when renumbered (rank
    /// r), the default stream as it is and the others shifted by r, in reverse order on an odd
    /// rank (the presets' streams lie in 20..=60).
    pub fn stream_id(&self, stream: u32) -> u32 {
        match self.renumbered {
            Some(r) if stream != DEFAULT_STREAM && r % 2 == 1 => 100 - stream + r,
            Some(r) if stream != DEFAULT_STREAM => stream + r,
            _ => stream,
        }
    }
}

/// How the captured program looks: where NCCL runs and which NVTX the framework emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Communication is launched on the compute stream instead of its own streams.
    pub nccl_on_compute: bool,
    /// The framework's NVTX ranges (rank label, steps, stages) are written; NCCL's always are.
    pub framework_nvtx: bool,
    /// (rank, ns): that rank's collectives start this much later than it would start them (its
    /// compute before each collective runs longer), so it arrives last.
    pub straggler: Option<(usize, i64)>,
    /// OS runtime calls are recorded (`--trace=osrt`).
    pub osrt: bool,
    /// Compute kernels are launched as one-node CUDA graphs, traced as whole graphs
    /// (`--cuda-graph-trace=graph`).
    pub cuda_graphs: bool,
    /// Compute kernels are launched as one-node CUDA graphs, traced node by node
    /// (`--cuda-graph-trace=node`: kernels carry their graph node id).
    pub cuda_graph_nodes: bool,
    /// How MPI calls are recorded (`--trace=mpi`), when the programs make them.
    pub mpi: Option<MpiTrace>,
    /// Compute kernels and copies are OpenACC directives (`--trace=openacc`): each launch sits
    /// in a compute construct and an enqueue launch, each copy in an enqueue upload.
    pub openacc: bool,
    /// NCCL's API ranges carry their extended payloads (`jsonText`).
    pub nccl_payloads: bool,
    /// The GPU starts work at least this many ns after its launch returned (a deep queue).
    pub launch_ahead: i64,
    /// PyTorch's shape NVTX (`nsys profile --pytorch=autograd-shapes-nvtx`) is written: the
    /// operator's range with its input sizes around every GEMM's and attention kernel's launch.
    pub shape_nvtx: bool,
}

/// One point-to-point transfer as the simulator ran it: who sent it, who received it, when
/// each kernel started, and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PlacedTransfer {
    /// The sending rank.
    pub sender: usize,
    /// Its kernel's start, ns.
    pub send_start: i64,
    /// The receiving rank.
    pub receiver: usize,
    /// Its kernel's start, ns.
    pub recv_start: i64,
    /// What it moves, bytes (NCCL's `Message size [bytes]` of both calls).
    pub bytes: u64,
}

/// One collective as the simulator ran it: its members and when each one's kernel started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedCollective {
    /// The kernel's short name, as the export names it.
    pub kernel: &'static str,
    /// Whether the capture shows point-to-point transfers, not a collective (a ring step's
    /// send and receive, DeepEP's dispatch with only its name to go by), which `collectives`
    /// leaves out; an all-to-all's group of sends and receives is a collective.
    pub point_to_point: bool,
    /// Member ranks, in group order.
    pub members: Vec<usize>,
    /// Each member's kernel start, ns (the member's arrival).
    pub starts: Vec<i64>,
    /// When every member's kernel ended, ns.
    pub end: i64,
    /// Its buffer size, bytes (the larger of input and output), for a collective NCCL or
    /// PyTorch records; None for transfers.
    pub bytes: Option<u64>,
}

/// What PyTorch's `record_param_comms` says of a collective, a send or a receive one rank
/// called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchCall {
    /// The launch's correlation id.
    pub correlation: u32,
    /// PyTorch's name for the call (`allreduce`, `all_to_all`, `send`, `recv`, ...).
    pub name: &'static str,
    /// Input and output elements.
    pub nelems: (u64, u64),
    /// PyTorch's name of their type (`c10::ScalarType`: `Float`, `BFloat16`).
    pub dtype: &'static str,
    /// Its process group: the group's number and its member ranks (a transfer's: its channel,
    /// sender and receiver).
    pub group: (GroupId, Vec<usize>),
}

/// One kernel the simulator placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Stream id.
    pub stream: u32,
    /// `compute`, or the role the capture's evidence supports for a communication kernel:
    /// `barrier` (a collective on the compute stream), the framework's purpose when its NVTX is
    /// written, else what NCCL's calls show (`nccl:AllReduce`, `nccl:AllToAll`, `p2p`).
    pub role: &'static str,
    /// The family `kernels` must give it: what its name says, or a communication kernel's
    /// role (its collective when the role is `barrier`, a stream's meaning, not a kernel's).
    pub family: &'static str,
}

/// The family `kernels` gives a communication kernel of `kind` with `role`: the role, but
/// `barrier` (what a collective does to the compute stream it runs on) leaves the collective.
fn comm_family(role: &'static str, kind: &KernelKind) -> &'static str {
    match role {
        "barrier" => kind.family,
        role => role,
    }
}

/// What the simulator placed for one rank, on the generator's clock (which is the merged clock
/// of the exports it writes): every kernel with its role, and the `ProfilerStep#N` ranges.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    /// Every kernel.
    pub kernels: Vec<Placed>,
    /// The collectives it took part in (each instance appears in every member's schedule).
    pub collectives: Vec<PlacedCollective>,
    /// The point-to-point transfers it received.
    pub transfers: Vec<PlacedTransfer>,
    /// (start, end) of every `ProfilerStep#N` range, in order.
    pub steps: Vec<(i64, i64)>,
    /// The collectives, sends and receives it called, as PyTorch records them.
    pub torch_calls: Vec<TorchCall>,
    /// Every GEMM and attention kernel it ran, with the operator that launched it.
    pub operators: Vec<Operator>,
    /// Every GPU operation (kernels, copies, sets) with what set its start.
    pub ops: Vec<Ran>,
    /// Its launches and host waits, in order.
    pub calls: Vec<HostCall>,
    /// The collectives whose first member it is and the transfers it received: their members.
    pub exchanges: Vec<Members>,
}

impl Style {
    /// The stream a communication operation runs on.
    fn comm_stream(self, stream: u32) -> u32 {
        if self.nccl_on_compute {
            DEFAULT_STREAM
        } else {
            stream
        }
    }

    /// The role the capture supports for a communication kernel of `kind` (see
    /// [`Placed::role`]).
    fn role(
        self,
        (stream, kind): (u32, &KernelKind),
        call: Call,
        purpose: Option<&'static str>,
    ) -> &'static str {
        match (call, purpose) {
            (Call::Collective(_) | Call::Direct, _)
                if stream == DEFAULT_STREAM && !kind.point_to_point =>
            {
                "barrier"
            }
            (_, Some(purpose)) if self.framework_nvtx => purpose,
            (Call::Collective(api), _) => collective_role(api),
            (Call::AllToAll, _) => "nccl:AllToAll",
            (Call::Ring, _) => "p2p",
            (Call::Direct, _) => kind.family,
        }
    }
}

/// `nccl:AllReduce` for `ncclAllReduce`.
fn collective_role(api: &str) -> &'static str {
    match api {
        "ncclAllReduce" => "nccl:AllReduce",
        "ncclAllGather" => "nccl:AllGather",
        "ncclReduceScatter" => "nccl:ReduceScatter",
        "ncclBroadcast" => "nccl:Broadcast",
        _ => "nccl:other",
    }
}

/// First correlation id of every process (CUPTI numbers calls per process).
const FIRST_CORRELATION: u32 = 1_200;

/// Mutable state of one rank while its program runs.
struct RankState {
    /// Its compute's duration factor (`--slow-rank`), and the CPU time it spends before each
    /// launch (`--launch-bound`).
    slowness: (f64, i64),
    /// Families' duration factors (`--scale-family`).
    families: Vec<(String, f64)>,
    index: usize,
    place: Placement,
    style: Style,
    pc: usize,
    cpu: i64,
    launcher: Launcher,
    streams: Vec<Lane>,
    correlation: u32,
    open: Vec<(i64, u32, String)>,
    rng: Rng,
    schedule: Schedule,
    /// MPI request handles made so far.
    requests: i64,
    /// The span of the last API call it made.
    last_call: (i64, i64),
}

impl RankState {
    /// The duration of an operation of `family` (a communication kernel's: its role) that
    /// would take `ns`, with `--scale-family`.
    fn scaled(&self, ns: i64, family: &str) -> i64 {
        let scale: f64 = self
            .families
            .iter()
            .filter(|(name, _)| in_group(name, family))
            .map(|(_, f)| f)
            .product();
        (ns as f64 * scale).round() as i64
    }

    /// The duration of a compute operation of `family` that would take `ns`, with the faults.
    fn faulted(&self, ns: i64, family: &str) -> i64 {
        (self.scaled(ns, family) as f64 * self.slowness.0).round() as i64
    }

    fn tid(&self) -> u32 {
        match self.launcher {
            Launcher::Main => self.place.pid,
            Launcher::Autograd => self.place.autograd_tid,
        }
    }

    fn lane(&mut self, stream: u32) -> &mut Lane {
        let index = match self.streams.iter().position(|s| s.id == stream) {
            Some(i) => i,
            None => {
                self.streams.push(Lane::new(stream));
                self.streams.len() - 1
            }
        };
        &mut self.streams[index]
    }

    /// Records a GPU operation launched by the rank's latest call, on `stream` over `span`,
    /// whose start `set_by` set; returns its index.
    fn ran(
        &mut self,
        stream: u32,
        span: (i64, i64),
        (label, comm): (&'static str, bool),
        set_by: SetBy,
    ) -> usize {
        let op = self.schedule.ops.len();
        self.schedule.ops.push(Ran {
            span,
            label,
            comm,
            launch: self.schedule.calls.len() - 1,
            stream,
            set_by,
        });
        self.lane(stream).occupy(op, span.1);
        op
    }

    fn gpu(&self, stream: u32) -> (u32, u32, u32) {
        (
            self.place.pid,
            self.place.device,
            self.place.stream_id(stream),
        )
    }
}

/// Runs all programs from CPU time `start` (ranks start within 2 ms of each other), writes
/// their rows into `nodes`, and returns what it placed per rank.
pub fn run(
    programs: &[Program],
    places: &[Placement],
    (groups, channels): (&Groups, &Channels),
    nodes: &mut [NodeExport],
    (start, seed): (i64, u64),
    (style, faults): (Style, &Faults),
) -> Result<Vec<Schedule>> {
    let mut ranks: Vec<RankState> = places
        .iter()
        .enumerate()
        .map(|(r, &place)| {
            let mut rng = Rng::new(seed ^ 0x5EED, r as u64);
            let slow = faults.slow_rank.filter(|s| s.0 == r).map_or(1.0, |s| s.1);
            let gap = faults.launch_bound.filter(|s| s.0 == r).map_or(0, |s| s.1);
            RankState {
                slowness: (slow, gap),
                families: faults.scale_family.clone(),
                index: r,
                place,
                style,
                pc: 0,
                cpu: start + (rng.unit() * 2_000_000.0) as i64,
                launcher: Launcher::Main,
                streams: Vec::new(),
                correlation: FIRST_CORRELATION,
                open: Vec::new(),
                rng,
                schedule: Schedule::default(),
                requests: 0,
                last_call: (0, 0),
            }
        })
        .collect();
    let mut blocked: Vec<Option<GroupId>> = vec![None; ranks.len()];
    let mut mailboxes = Mailboxes::default();
    loop {
        let mut progressed = false;
        for (r, rank) in ranks.iter_mut().enumerate() {
            if blocked[r].is_none() {
                let pc = rank.pc;
                let node = &mut nodes[rank.place.node];
                blocked[r] = run_local(rank, &programs[r], node, (&mut mailboxes, channels))?;
                progressed |= rank.pc != pc;
            }
        }
        for r in 0..ranks.len() {
            let Some(group) = blocked[r] else { continue };
            let members = groups.members(group);
            if members.iter().all(|&m| blocked[m] == Some(group)) {
                match programs[r].ops[ranks[r].pc] {
                    Op::MpiExchange { bytes, .. } => {
                        resolve_mpi(&mut ranks, members, programs, nodes, bytes)?
                    }
                    _ => resolve_comm(&mut ranks, members, programs, nodes)?,
                }
                for &m in members {
                    blocked[m] = None;
                }
                progressed = true;
            }
        }
        let done = ranks
            .iter()
            .enumerate()
            .all(|(r, s)| s.pc >= programs[r].ops.len());
        if done {
            return Ok(ranks.into_iter().map(|r| r.schedule).collect());
        }
        if !progressed {
            bail!("the preset's programs deadlock (a collective some member never reaches)");
        }
    }
}

/// A send not yet received.
struct Sent {
    /// The send's operation.
    op: OpRef,
    /// Its kernel's start and end, ns.
    span: (i64, i64),
    /// Its size, bytes.
    bytes: u64,
}

/// Sends not yet received, per channel, in order.
#[derive(Default)]
struct Mailboxes(FxHashMap<GroupId, VecDeque<Sent>>);

/// Runs a rank's operations until it reaches a collective (returned), a receive whose send has
/// not happened yet (returns None and stays there), or its end (None).
fn run_local(
    rank: &mut RankState,
    program: &Program,
    node: &mut NodeExport,
    (mailboxes, channels): (&mut Mailboxes, &Channels),
) -> Result<Option<GroupId>> {
    while let Some(op) = program.ops.get(rank.pc) {
        match op {
            Op::Comm { group, .. } | Op::MpiExchange { group, .. } => return Ok(Some(*group)),
            Op::Recv {
                channel,
                stream,
                role,
            } => {
                let Some(sent) = mailboxes.0.get_mut(channel).and_then(VecDeque::pop_front) else {
                    return Ok(None);
                };
                rank.pc += 1;
                let transfer = Transfer {
                    stream: *stream,
                    api: "ncclRecv",
                    purpose: *role,
                    message: (*channel, sent.bytes),
                    ends: channels.ends(*channel),
                };
                let (recv_start, _) = p2p(rank, node, transfer, RECV_MIN_NS, sent.span.1)?;
                let recv = (rank.index, rank.schedule.ops.len() - 1);
                rank.schedule.exchanges.push(Members {
                    ops: vec![sent.op, recv],
                    sender: Some(sent.op),
                });
                rank.schedule.transfers.push(PlacedTransfer {
                    sender: sent.op.0,
                    send_start: sent.span.0,
                    receiver: rank.index,
                    recv_start,
                    bytes: sent.bytes,
                });
            }
            Op::Send {
                channel,
                stream,
                dur,
                role,
            } => {
                rank.pc += 1;
                let bytes = (*dur * BYTES_PER_NS) as u64;
                let transfer = Transfer {
                    stream: *stream,
                    api: "ncclSend",
                    purpose: *role,
                    message: (*channel, bytes),
                    ends: channels.ends(*channel),
                };
                // The receive can end no earlier than the send (started then, plus the transfer).
                let span = p2p(rank, node, transfer, *dur, i64::MIN)?;
                let op = (rank.index, rank.schedule.ops.len() - 1);
                let send = Sent { op, span, bytes };
                mailboxes.0.entry(*channel).or_default().push_back(send);
            }
            _ => {
                rank.pc += 1;
                run_op(rank, op, node)?;
            }
        }
    }
    Ok(None)
}

/// NCCL's NVTX ranges before a launch (a group's start, its sends and receives: `before`), then
/// the range the launch sits in, which opens 200 ns before it: returns that range's start and
/// moves the rank's CPU time past it (so consecutive NCCL ranges of one thread never overlap).
fn open_nccl_calls(
    rank: &mut RankState,
    node: &mut NodeExport,
    before: &[&'static str],
) -> Result<i64> {
    let who = (rank.place.pid, rank.tid());
    for &text in before {
        let start = rank.cpu;
        rank.cpu += 600;
        node.nvtx_range(
            (start, start + 450),
            who,
            NvtxText::Registered(text),
            NCCL_DOMAIN,
        )?;
    }
    let start = rank.cpu;
    rank.cpu += 200;
    Ok(start)
}

/// The calls before a collective's launch, and the call it is launched in.
fn call_ranges(call: Call, members: usize) -> Option<(Vec<&'static str>, &'static str)> {
    Some(match call {
        Call::Collective(api) => (Vec::new(), api),
        Call::AllToAll => {
            let mut before = vec!["ncclGroupStart"];
            for _ in 0..members {
                before.extend(["ncclSend", "ncclRecv"]);
            }
            (before, "ncclGroupEnd")
        }
        Call::Ring => (
            vec!["ncclGroupStart", "ncclSend", "ncclRecv"],
            "ncclGroupEnd",
        ),
        Call::Direct => return None,
    })
}

/// One point-to-point call: its stream, NCCL API and framework purpose.
struct Transfer {
    stream: u32,
    api: &'static str,
    purpose: Option<&'static str>,
    /// Its channel (the communicator of its pair) and size, bytes.
    message: (GroupId, u64),
    /// The channel's sender and receiver.
    ends: Option<[usize; 2]>,
}

/// Shortest receive kernel, ns.
const RECV_MIN_NS: i64 = 8_000;

/// Launches a `SendRecv` kernel of at least `dur` that cannot end before `earliest_end`, in its
/// own `ncclSend` or `ncclRecv` call; returns its start and end.
fn p2p(
    rank: &mut RankState,
    node: &mut NodeExport,
    transfer: Transfer,
    dur: i64,
    earliest_end: i64,
) -> Result<(i64, i64)> {
    let stream = rank.style.comm_stream(transfer.stream);
    let range_start = open_nccl_calls(rank, node, &[])?;
    let (ready, correlation) = launch(rank, node, "cuLaunchKernelEx", 1)?;
    let who = (rank.place.pid, rank.tid());
    let (channel, bytes) = transfer.message;
    let payload = nccl_payload(rank, transfer.api, channel, bytes);
    // PyTorch records a send's and a receive's tensor as it does a collective's.
    let (dtype, width) = data_type(NCCL_SENDRECV.short);
    let elements = bytes / width;
    rank.schedule.torch_calls.push(TorchCall {
        correlation,
        name: if transfer.api == "ncclSend" {
            "send"
        } else {
            "recv"
        },
        nelems: (elements, elements),
        dtype,
        group: (channel, transfer.ends.map_or_else(Vec::new, Vec::from)),
    });
    let text = NvtxText::Registered(transfer.api);
    node.nccl_range((range_start, rank.cpu), who, text, payload.as_deref())?;
    let (start, set_by) = rank.lane(stream).start(ready);
    let end = (start + dur).max(earliest_end);
    node.kernel((start, end), rank.gpu(stream), correlation, &NCCL_SENDRECV)?;
    let role = match (transfer.purpose, rank.style.framework_nvtx) {
        (Some(purpose), true) => purpose,
        _ => "p2p",
    };
    let family = comm_family(role, &NCCL_SENDRECV);
    rank.ran(stream, (start, end), (family, true), set_by);
    rank.schedule.kernels.push(Placed {
        start,
        end,
        stream,
        role,
        family,
    });
    Ok((start, end))
}

fn run_op(rank: &mut RankState, op: &Op, node: &mut NodeExport) -> Result<()> {
    match op {
        Op::Push(text) => {
            let tid = rank.tid();
            rank.open.push((rank.cpu, tid, text.clone()));
            rank.cpu += 300;
        }
        Op::Pop => {
            if let Some((start, tid, text)) = rank.open.pop() {
                rank.cpu += 300;
                if text.starts_with("ProfilerStep#") {
                    rank.schedule.steps.push((start, rank.cpu));
                }
                if rank.style.framework_nvtx {
                    let who = (rank.place.pid, tid);
                    node.nvtx_range((start, rank.cpu), who, NvtxText::Inline(&text), 0)?;
                }
            }
        }
        Op::Cpu(ns) => rank.cpu += ns,
        Op::Blocked { call, ns } => {
            if rank.style.osrt {
                node.os_call(
                    (rank.cpu, rank.cpu + ns),
                    (rank.place.pid, rank.tid()),
                    call,
                )?;
            }
            rank.cpu += ns;
        }
        Op::Thread(launcher) => rank.launcher = *launcher,
        Op::Kernel { stream, kind, dur } => {
            let nominal = *dur;
            let dur = rank.faulted(nominal, node.family(kind));
            let (graph, nodes) = (rank.style.cuda_graphs, rank.style.cuda_graph_nodes);
            let api = match graph || nodes {
                true => "cudaGraphLaunch_v10000",
                false => "cudaLaunchKernel_v7000",
            };
            let (ready, correlation) = launch(rank, node, api, 0)?;
            let (start, set_by) = rank.lane(*stream).start(ready);
            let family = node.family(kind);
            // A graph traced whole shows the graph, not its kernel.
            let label = if graph { CUDA_GRAPH } else { family };
            rank.ran(*stream, (start, start + dur), (label, false), set_by);
            if let Some(shapes) = Shapes::of(kind, nominal) {
                let (launch, end) = rank.last_call;
                let operator = Operator {
                    correlation,
                    launch,
                    start,
                    shapes,
                };
                if rank.style.shape_nvtx {
                    let (who, text) = ((rank.place.pid, rank.tid()), operator.nvtx());
                    let span = (launch - 200, end + 200);
                    node.nvtx_range(span, who, NvtxText::Inline(&text), 0)?;
                }
                rank.schedule.operators.push(operator);
            }
            let (span, place) = ((start, start + dur), rank.gpu(*stream));
            // One graph per kernel kind, instantiated once; its one node has the same id.
            let id = 1 + kind
                .short
                .bytes()
                .fold(1u32, |h, b| h.wrapping_mul(31).wrapping_add(b.into()))
                % 1000;
            if rank.style.openacc {
                acc_launch(rank, node, kind, 100 + i64::from(id % 50))?;
            }
            if graph {
                node.graph_launch(span, place, correlation, (id, id))?;
            } else if nodes {
                node.graph_kernel(span, place, correlation, kind, id)?;
            } else {
                node.kernel(span, place, correlation, kind)?;
            }
            rank.schedule.kernels.push(Placed {
                start,
                end: start + dur,
                stream: *stream,
                role: "compute",
                family,
            });
        }
        Op::Wait { stream, on } => {
            let (_, correlation) = launch(rank, node, "cudaStreamWaitEvent_v3020", 0)?;
            let other = *rank.lane(*on);
            rank.lane(*stream).wait_for(&other);
            let at = rank.cpu;
            node.sync((at - 900, at - 300), rank.gpu(*stream), correlation, 2)?;
        }
        Op::Memcpy { stream, bytes, dur } => {
            let dur = rank.faulted(*dur, MEMCPY);
            let (ready, correlation) = launch(rank, node, "cudaMemcpyAsync_v3020", 0)?;
            if rank.style.openacc {
                let upload = AccRow {
                    table: AccTable::Data,
                    kind: 5,
                    name: "acc_enqueue_upload",
                    line: 42,
                    device: rank.place.device,
                    object: Some("weights"),
                    bytes: *bytes as i64,
                };
                let (b, e) = rank.last_call;
                node.openacc((b - 150, e + 150), (rank.place.pid, rank.tid()), &upload)?;
            }
            let (start, set_by) = rank.lane(*stream).start(ready);
            rank.ran(*stream, (start, start + dur), (MEMCPY, false), set_by);
            node.memcpy((start, start + dur), rank.gpu(*stream), correlation, *bytes)?;
        }
        Op::Memset { stream, bytes, dur } => {
            let dur = rank.faulted(*dur, MEMSET);
            let (ready, correlation) = launch(rank, node, "cudaMemsetAsync_v3020", 0)?;
            let (start, set_by) = rank.lane(*stream).start(ready);
            rank.ran(*stream, (start, start + dur), (MEMSET, false), set_by);
            node.memset((start, start + dur), rank.gpu(*stream), correlation, *bytes)?;
        }
        Op::Sync(stream) => {
            let begin = rank.cpu;
            let lane = *rank.lane(*stream);
            let until = lane.free.max(begin) + 2_000;
            // A host wait when the stream still had work: for the operation that frees it.
            if let Some(waited) = lane.setter().filter(|_| lane.free > begin) {
                let waited = Some(waited);
                rank.schedule.calls.push(HostCall {
                    span: (begin, until),
                    waited,
                });
            }
            rank.correlation += 1;
            let who = (rank.place.pid, rank.tid());
            node.api(
                (begin, until),
                who,
                rank.correlation,
                "cudaStreamSynchronize_v3020",
                0,
            )?;
            node.sync(
                (begin + 500, until - 500),
                rank.gpu(*stream),
                rank.correlation,
                3,
            )?;
            rank.cpu = until + 1_000;
        }
        Op::MpiLocal(name, ns) => {
            let span = (rank.cpu, rank.cpu + ns);
            write_mpi(rank, node, span, MpiRow::Other(name))?;
            rank.cpu += ns + 1_000;
        }
        Op::Comm { .. } | Op::Send { .. } | Op::Recv { .. } | Op::MpiExchange { .. } => {
            unreachable!("communication is run by the scheduler")
        }
    }
    Ok(())
}

/// The extended payload NCCL 2.23 and later give its call `api` (as nsys exports it with
/// `--include-json=true`), when the style writes payloads: the bytes moved (at 100 GB/s over
/// `dur` ns) and, for a reduction, its operation.
fn nccl_payload(rank: &RankState, api: &str, group: GroupId, message: u64) -> Option<String> {
    if !rank.style.nccl_payloads || !api.starts_with("nccl") || api.starts_with("ncclGroup") {
        return None;
    }
    let id = communicator_id(group);
    let head = format!(r#"{{"NCCL communicator ID": {id}, "Message size [bytes]": {message}"#);
    Some(match api {
        "ncclAllReduce" | "ncclReduceScatter" | "ncclReduce" => {
            format!(r#"{head}, "Reduction operation": "Sum"}}"#)
        }
        _ => format!("{head}}}"),
    })
}

/// The communicator id NCCL would hash for a group: the same on every member, wide as NCCL's.
fn communicator_id(group: GroupId) -> u64 {
    0x9E37_79B9_7F4A_7C15_u64.wrapping_mul(u64::from(group) + 1)
}

/// Bytes a collective moves per ns of its transfer (100 GB/s of algorithm bandwidth).
const BYTES_PER_NS: i64 = 100;

/// What a collective moves: its buffer, bytes; PyTorch's name and (input, output) element
/// counts; NCCL's `Message size [bytes]` (one member's part for an all-gather, a
/// reduce-scatter and an all-to-all's sends).
struct Sizes {
    buffer: u64,
    name: &'static str,
    nelems: (u64, u64),
    message: u64,
}

/// The sizes of a collective of `width`-byte elements (a whole number per member) whose
/// transfer takes `transfer` ns; None for the calls that are transfers or not NCCL's.
fn sizes(call: Call, members: usize, transfer: i64, width: u64) -> Option<Sizes> {
    let n = members as u64;
    let elements = (transfer * BYTES_PER_NS) as u64 / width / n * n;
    let part = elements / n;
    let (name, nelems, message) = match call {
        Call::Collective("ncclAllGather") => ("_allgather_base", (part, elements), part),
        Call::Collective("ncclReduceScatter") => ("_reduce_scatter_base", (elements, part), part),
        Call::Collective("ncclAllReduce") => ("allreduce", (elements, elements), elements),
        Call::Collective("ncclBroadcast") => ("broadcast", (elements, elements), elements),
        Call::AllToAll => ("all_to_all", (elements, elements), part),
        _ => return None,
    };
    Some(Sizes {
        buffer: elements * width,
        name,
        nelems,
        message: message * width,
    })
}

/// PyTorch's name and the width of the data type a collective kernel's name says (NCCL's
/// `_f32`, `_bf16`, `_f16`); bf16 when it says none (`SendRecv`).
fn data_type(short: &str) -> (&'static str, u64) {
    if short.contains("_f32") {
        ("Float", 4)
    } else if short.contains("_f16") {
        ("Half", 2)
    } else {
        ("BFloat16", 2)
    }
}

/// The OpenACC events around the launch just made of a compute kernel `kind` (directive at
/// `line`): a compute construct holding an enqueue launch, each 150 ns beyond the other.
fn acc_launch(rank: &RankState, node: &mut NodeExport, kind: &KernelKind, line: i64) -> Result<()> {
    let (b, e) = rank.last_call;
    let who = (rank.place.pid, rank.tid());
    let event = |table, kind, name, object| AccRow {
        table,
        kind,
        name,
        line,
        device: rank.place.device,
        object,
        bytes: 0,
    };
    let construct = event(AccTable::Other, 9, "acc_compute_construct", None);
    node.openacc((b - 300, e + 300), who, &construct)?;
    let enqueue = event(AccTable::Launch, 4, "acc_enqueue_launch", Some(kind.short));
    node.openacc((b - 150, e + 150), who, &enqueue)
}

/// Writes one API call at the rank's CPU time; returns when its GPU work can start and its
/// correlation id.
fn launch(
    rank: &mut RankState,
    node: &mut NodeExport,
    name: &str,
    class: i64,
) -> Result<(i64, u32)> {
    rank.cpu += rank.slowness.1;
    let begin = rank.cpu;
    let end = begin + rank.rng.around(5_000, 0.4);
    rank.correlation += 1;
    let who = (rank.place.pid, rank.tid());
    node.api((begin, end), who, rank.correlation, name, class)?;
    rank.last_call = (begin, end);
    let call = HostCall {
        span: (begin, end),
        waited: None,
    };
    rank.schedule.calls.push(call);
    rank.cpu = end + rank.rng.around(1_500, 0.5);
    let ready = end + rank.rng.around(3_000, 0.3) + rank.style.launch_ahead;
    Ok((ready, rank.correlation))
}

/// Runs the collective every member of a group is waiting at.
fn resolve_comm(
    ranks: &mut [RankState],
    members: &[usize],
    programs: &[Program],
    nodes: &mut [NodeExport],
) -> Result<()> {
    let mut launches = Vec::with_capacity(members.len());
    let mut last_ready = i64::MIN;
    let transfer = members
        .iter()
        .map(|&m| match programs[m].ops[ranks[m].pc] {
            Op::Comm { dur, .. } => dur,
            _ => unreachable!("blocked ranks stand at a collective"),
        })
        .max()
        .unwrap_or(0);
    let mut bytes = None;
    // Whether the capture shows transfers, not a collective (the same call on every member).
    let mut point_to_point = false;
    for &m in members {
        let rank = &mut ranks[m];
        let Op::Comm {
            group,
            stream,
            kind,
            call,
            role,
            ..
        } = &programs[m].ops[rank.pc]
        else {
            unreachable!("blocked ranks stand at a collective")
        };
        let (dtype, width) = data_type(nodes[rank.place.node].named(kind).short);
        let sized = sizes(*call, members.len(), transfer, width);
        rank.pc += 1;
        point_to_point = match call {
            Call::Ring => true,
            Call::Direct => kind.point_to_point,
            Call::Collective(_) | Call::AllToAll => false,
        };
        let stream = rank.style.comm_stream(*stream);
        let role = rank.style.role((stream, kind), *call, *role);
        let node = &mut nodes[rank.place.node];
        let (ready, correlation) = match call_ranges(*call, members.len()) {
            Some((before, api)) => {
                let range_start = open_nccl_calls(rank, node, &before)?;
                let launched = launch(rank, node, "cuLaunchKernelEx", 1)?;
                let who = (rank.place.pid, rank.tid());
                let message = sized.as_ref().map_or(0, |s| s.message);
                let payload = nccl_payload(rank, api, *group, message);
                let text = NvtxText::Registered(api);
                node.nccl_range((range_start, rank.cpu), who, text, payload.as_deref())?;
                launched
            }
            None => launch(rank, node, "cudaLaunchKernelExC_v11060", 0)?,
        };
        let delay = match rank.style.straggler {
            Some((straggler, ns)) if straggler == m => ns,
            _ => 0,
        };
        let (ready, set_by) = rank.lane(stream).start(ready);
        let ready = ready + delay;
        last_ready = last_ready.max(ready);
        if let Some(sized) = sized {
            bytes = Some(sized.buffer);
            rank.schedule.torch_calls.push(TorchCall {
                correlation,
                name: sized.name,
                nelems: sized.nelems,
                dtype,
                group: (*group, members.to_vec()),
            });
        }
        launches.push((m, stream, *kind, ready, correlation, role, set_by));
    }
    let role = launches.first().map_or("", |l| l.5);
    let end = last_ready + ranks[members[0]].scaled(transfer, role);
    let first = launches.first().map(|l| (ranks[l.0].place.node, l.2));
    let placed = PlacedCollective {
        kernel: first.map_or("", |(node, kind)| nodes[node].named(kind).short),
        point_to_point,
        members: members.to_vec(),
        starts: launches.iter().map(|l| l.3).collect(),
        end,
        bytes,
    };
    let mut ops = Vec::with_capacity(members.len());
    for (m, stream, kind, ready, correlation, role, set_by) in launches {
        let rank = &mut ranks[m];
        let kind: &KernelKind = kind;
        let family = comm_family(role, kind);
        ops.push((m, rank.ran(stream, (ready, end), (family, true), set_by)));
        nodes[rank.place.node].kernel((ready, end), rank.gpu(stream), correlation, kind)?;
        rank.schedule.kernels.push(Placed {
            start: ready,
            end,
            stream,
            role,
            family,
        });
        rank.schedule.collectives.push(placed.clone());
    }
    let first = &mut ranks[members[0]].schedule.exchanges;
    first.push(Members { ops, sender: None });
    Ok(())
}

/// An MPI call to record, by the table `--trace=mpi` files it in.
enum MpiRow<'a> {
    P2p(&'static str, P2pFields),
    Wait(&'static str, &'a [i64]),
    Collective(&'static str, i64),
    Other(&'static str),
}

/// Records an MPI call of `rank` as its style says: in nsys's MPI tables, as an NVTX range of
/// the `MPI` domain (nsys 2022.x), or not at all.
fn write_mpi(rank: &RankState, node: &mut NodeExport, span: (i64, i64), row: MpiRow) -> Result<()> {
    let who = (rank.place.pid, rank.tid());
    let name = match row {
        MpiRow::P2p(name, _)
        | MpiRow::Wait(name, _)
        | MpiRow::Collective(name, _)
        | MpiRow::Other(name) => name,
    };
    match (rank.style.mpi, row) {
        (None, _) => Ok(()),
        (Some(MpiTrace::Nvtx), _) => node.mpi_nvtx(span, who, name, rank.index),
        (Some(MpiTrace::Tables), MpiRow::P2p(_, fields)) => node.mpi_p2p(span, who, name, fields),
        (Some(MpiTrace::Tables), MpiRow::Wait(_, requests)) => {
            node.mpi_wait(span, who, name, requests)
        }
        (Some(MpiTrace::Tables), MpiRow::Collective(_, bytes)) => {
            node.mpi_collective(span, who, name, bytes)
        }
        (Some(MpiTrace::Tables), MpiRow::Other(_)) => node.mpi_other(span, who, name),
    }
}

/// The MPI message tag of the step exchange.
const MPI_TAG: i64 = 7;

/// Runs the MPI exchange every member of a group is waiting at: each posts its send to the next
/// member and its receive from the previous at its own time; the waits return once the last
/// member posted and `bytes` crossed (at 25 GB/s); then the loss all-reduce, which ends together
/// once the last member entered it.
fn resolve_mpi(
    ranks: &mut [RankState],
    members: &[usize],
    programs: &[Program],
    nodes: &mut [NodeExport],
    bytes: i64,
) -> Result<()> {
    let n = members.len();
    let mut requests = Vec::with_capacity(n);
    let mut last_posted = i64::MIN;
    for (i, &m) in members.iter().enumerate() {
        let rank = &mut ranks[m];
        debug_assert!(matches!(programs[m].ops[rank.pc], Op::MpiExchange { .. }));
        rank.pc += 1;
        let (next, prev) = (members[(i + 1) % n], members[(i + n - 1) % n]);
        let base = 0x7f3a_0000_0000 + (m as i64) * 0x1_0000 + rank.requests * 0x40;
        rank.requests += 2;
        let (send, recv) = (base, base + 0x40);
        let node = &mut nodes[rank.place.node];
        let at = rank.cpu;
        let send_fields = (next as i64, MPI_TAG, bytes, send);
        write_mpi(
            rank,
            node,
            (at, at + 1_800),
            MpiRow::P2p("MPI_Isend", send_fields),
        )?;
        let recv_fields = (prev as i64, MPI_TAG, bytes, recv);
        let span = (at + 2_000, at + 3_500);
        write_mpi(rank, node, span, MpiRow::P2p("MPI_Irecv", recv_fields))?;
        rank.cpu = at + 4_000;
        last_posted = last_posted.max(rank.cpu);
        requests.push([send, recv]);
    }
    let arrived = last_posted + bytes / 25;
    let mut last_entered = i64::MIN;
    for (&m, requests) in members.iter().zip(&requests) {
        let rank = &mut ranks[m];
        let end = rank.cpu.max(arrived) + rank.rng.around(2_000, 0.5);
        let node = &mut nodes[rank.place.node];
        let span = (rank.cpu, end);
        write_mpi(rank, node, span, MpiRow::Wait("MPI_Waitall", requests))?;
        rank.cpu = end + 800;
        last_entered = last_entered.max(rank.cpu);
    }
    let reduced = last_entered + 15_000;
    for &m in members {
        let rank = &mut ranks[m];
        let node = &mut nodes[rank.place.node];
        let span = (rank.cpu, reduced);
        write_mpi(rank, node, span, MpiRow::Collective("MPI_Allreduce", 8))?;
        rank.cpu = reduced + 500;
    }
    Ok(())
}
