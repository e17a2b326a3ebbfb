//! What each rank does, as a list of operations: NVTX ranges, CPU time, kernel launches on named
//! streams, collectives and point-to-point transfers with other ranks, stream waits and syncs.
//! Presets build one [`Program`] per rank; [`super::sim`] runs them together on one clock.

use super::kernels::KernelKind;
use super::rng::Rng;
use crate::hash::FxHashMap;

/// The thread a rank launches from (PyTorch launches backward kernels from its autograd thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// The Python main thread.
    Main,
    /// PyTorch's autograd engine thread.
    Autograd,
}

/// A set of ranks that communicate, with a tag that separates independent channels between the
/// same ranks (e.g. forward and backward pipeline messages).
pub type GroupId = u32;

/// The NCCL API calls of a collective operation, as NCCL's NVTX ranges show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// One collective call (`ncclAllReduce`, ...) that launches the kernel.
    Collective(&'static str),
    /// A group with one send and one receive per member, self included (PyTorch's
    /// `all_to_all_single`).
    AllToAll,
    /// A group with one send to the next member and one receive from the previous (a ring step).
    Ring,
    /// No NCCL call: a library that bypasses NCCL launches its own kernel (DeepEP's dispatch,
    /// Transformer Engine's userbuffers), whose name is the only evidence of its role.
    Direct,
}

/// One operation of a rank.
#[derive(Debug, Clone)]
pub enum Op {
    /// Opens an NVTX push/pop range on the launching thread.
    Push(String),
    /// Closes the innermost open range.
    Pop,
    /// CPU work, ns.
    Cpu(i64),
    /// The launching thread blocked in an OS runtime call (a row of `OSRT_API` with `--osrt`).
    Blocked {
        /// The function, e.g. `pthread_cond_wait`.
        call: &'static str,
        /// How long, ns.
        ns: i64,
    },
    /// Switches the launching thread.
    Thread(Launcher),
    /// Launches a kernel on a stream.
    Kernel {
        /// Stream id.
        stream: u32,
        /// What runs.
        kind: &'static KernelKind,
        /// Duration, ns.
        dur: i64,
    },
    /// Launches an NCCL kernel that runs together with the same operation on every member of
    /// its group (all start when the last is ready, end together).
    Comm {
        /// The communicating ranks.
        group: GroupId,
        /// Stream id.
        stream: u32,
        /// What runs.
        kind: &'static KernelKind,
        /// Transfer time once every member is ready, ns.
        dur: i64,
        /// The NCCL API calls, shown as NCCL's NVTX ranges.
        call: Call,
        /// What the framework does it for (`ep_a2a`, `cp_ring`), when its NVTX says so.
        role: Option<&'static str>,
    },
    /// A point-to-point send on `channel` (buffered: the sender does not wait for the receiver),
    /// one `ncclSend` call.
    Send {
        /// The (sender, receiver) channel.
        channel: GroupId,
        /// Stream id.
        stream: u32,
        /// Transfer time, ns.
        dur: i64,
        /// What the framework does it for (`pp_p2p`), when its NVTX says so.
        role: Option<&'static str>,
    },
    /// The receive matching the next unmatched send on `channel`, one `ncclRecv` call: it cannot
    /// end before that send started plus the transfer time.
    Recv {
        /// The (sender, receiver) channel.
        channel: GroupId,
        /// Stream id.
        stream: u32,
        /// What the framework does it for (`pp_p2p`), when its NVTX says so.
        role: Option<&'static str>,
    },
    /// `cudaStreamWaitEvent`: `stream` waits for the work queued so far on `on`.
    Wait {
        /// The waiting stream.
        stream: u32,
        /// The stream waited on.
        on: u32,
    },
    /// A host-to-device copy.
    Memcpy {
        /// Stream id.
        stream: u32,
        /// Bytes.
        bytes: u64,
        /// Duration, ns.
        dur: i64,
    },
    /// A memset.
    Memset {
        /// Stream id.
        stream: u32,
        /// Bytes.
        bytes: u64,
        /// Duration, ns.
        dur: i64,
    },
    /// `cudaStreamSynchronize`: the CPU waits for the stream.
    Sync(u32),
    /// An MPI call of this rank alone (`MPI_Init`, `MPI_Finalize`), lasting about `ns`.
    MpiLocal(&'static str, i64),
    /// The step's MPI exchange among the members of `group`: each sends `bytes` to the next
    /// member and receives from the previous (`MPI_Isend`, `MPI_Irecv`, `MPI_Waitall` on both),
    /// then all reduce the loss (`MPI_Allreduce` of 8 bytes).
    MpiExchange {
        /// The world.
        group: GroupId,
        /// Bytes each member sends.
        bytes: i64,
    },
}

/// The operations of one rank, built with jittered durations from the rank's own generator.
#[derive(Debug, Clone)]
pub struct Program {
    /// The operations in order.
    pub ops: Vec<Op>,
    rng: Rng,
}

impl Program {
    /// An empty program whose durations vary by `seed` and `rank`.
    pub fn new(seed: u64, rank: usize) -> Program {
        Program {
            ops: Vec::new(),
            rng: Rng::new(seed, rank as u64 + 1),
        }
    }

    /// Runs `body` inside an NVTX range.
    pub fn range(&mut self, text: impl Into<String>, body: impl FnOnce(&mut Program)) {
        self.ops.push(Op::Push(text.into()));
        body(self);
        self.ops.push(Op::Pop);
    }

    /// CPU work of about `ns`.
    pub fn cpu(&mut self, ns: i64) {
        let ns = self.rng.around(ns, 0.1);
        self.ops.push(Op::Cpu(ns));
    }

    /// The thread waits about `ns` in the OS call `call` (CPU time like [`Program::cpu`]).
    pub fn blocked(&mut self, call: &'static str, ns: i64) {
        let ns = self.rng.around(ns, 0.1);
        self.ops.push(Op::Blocked { call, ns });
    }

    /// Launches from `launcher` from now on.
    pub fn thread(&mut self, launcher: Launcher) {
        self.ops.push(Op::Thread(launcher));
    }

    /// A kernel of about `ns` on `stream`.
    pub fn kernel(&mut self, stream: u32, kind: &'static KernelKind, ns: i64) {
        let dur = self.rng.around(ns, 0.15);
        self.ops.push(Op::Kernel { stream, kind, dur });
    }

    /// A collective or transfer of about `ns` with the other members of `group`, made by
    /// `call`, for the framework purpose `role` when there is one.
    pub fn comm(
        &mut self,
        group: GroupId,
        stream: u32,
        kind: &'static KernelKind,
        ns: i64,
        (call, role): (Call, Option<&'static str>),
    ) {
        let dur = self.rng.around(ns, 0.2);
        self.ops.push(Op::Comm {
            group,
            stream,
            kind,
            dur,
            call,
            role,
        });
    }

    /// Sends about `ns` worth of data on `channel`.
    pub fn send(&mut self, channel: GroupId, stream: u32, ns: i64, role: Option<&'static str>) {
        let dur = self.rng.around(ns, 0.2);
        self.ops.push(Op::Send {
            channel,
            stream,
            dur,
            role,
        });
    }

    /// Receives the next message of `channel`.
    pub fn recv(&mut self, channel: GroupId, stream: u32, role: Option<&'static str>) {
        self.ops.push(Op::Recv {
            channel,
            stream,
            role,
        });
    }

    /// `stream` waits for `on`.
    pub fn wait(&mut self, stream: u32, on: u32) {
        self.ops.push(Op::Wait { stream, on });
    }

    /// A host-to-device copy of `bytes` at about 20 GB/s.
    pub fn memcpy(&mut self, stream: u32, bytes: u64) {
        let dur = self.rng.around((bytes / 20).max(1_000) as i64, 0.1);
        self.ops.push(Op::Memcpy { stream, bytes, dur });
    }

    /// A memset of `bytes`.
    pub fn memset(&mut self, stream: u32, bytes: u64) {
        let dur = self.rng.around((bytes / 400).max(1_500) as i64, 0.1);
        self.ops.push(Op::Memset { stream, bytes, dur });
    }

    /// The CPU waits for `stream`.
    pub fn sync(&mut self, stream: u32) {
        self.ops.push(Op::Sync(stream));
    }

    /// A uniform value in [0, 1) from the rank's generator.
    pub fn unit(&mut self) -> f64 {
        self.rng.unit()
    }
}

/// Communication groups: each distinct (members, tag) gets one [`GroupId`].
#[derive(Debug, Default, Clone)]
pub struct Groups {
    ids: FxHashMap<(Vec<usize>, &'static str), GroupId>,
    members: Vec<Vec<usize>>,
}

/// Directed point-to-point channels: each (sender, receiver) pair gets one [`GroupId`].
#[derive(Debug, Default, Clone)]
pub struct Channels {
    ids: FxHashMap<(usize, usize), GroupId>,
}

impl Channels {
    /// The channel from `sender` to `receiver`.
    pub fn get(&mut self, sender: usize, receiver: usize) -> GroupId {
        let next = self.ids.len() as GroupId;
        *self.ids.entry((sender, receiver)).or_insert(next)
    }

    /// The sender and receiver of `channel`.
    pub fn ends(&self, channel: GroupId) -> Option<[usize; 2]> {
        let found = self.ids.iter().find(|&(_, &id)| id == channel);
        found.map(|(&(sender, receiver), _)| [sender, receiver])
    }
}

impl Groups {
    /// The group of `members` (any order) on channel `tag`.
    pub fn get(&mut self, members: &[usize], tag: &'static str) -> GroupId {
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let next = self.members.len() as GroupId;
        let id = *self.ids.entry((sorted.clone(), tag)).or_insert(next);
        if id == next {
            self.members.push(sorted);
        }
        id
    }

    /// The ranks of a group.
    pub fn members(&self, group: GroupId) -> &[usize] {
        &self.members[group as usize]
    }
}
