//! Which kernels move data between GPUs: NCCL's (and RCCL's, which keeps NCCL's names, and
//! NCCL's symmetric-memory kernels), and those of the libraries that bypass NCCL: DeepEP's
//! expert all-to-all, Transformer Engine's userbuffers (tensor-parallel comm-GEMM overlap),
//! vLLM's and SGLang's custom all-reduce, TensorRT-LLM's MoE all-to-all, PyTorch's NVSHMEM
//! all-to-all (symmetric memory), NVSHMEM's stream collectives and XLA's ragged all-to-all. Every one of them is communication everywhere: in `streams`, `overlap`,
//! `bubbles`, `collectives`, `kernels`, both traces and the report.
//!
//! A kernel is recognised by its name alone, with string tests that cost a few nanoseconds (no
//! regex: every kernel of a capture goes through here several times). Its role by name (what
//! it gets when nothing around its launch says more) is its library's: an NCCL kernel's
//! collective (`nccl:AllReduce`), `ep_a2a` for the MoE all-to-alls, `tp_comm` for
//! tensor-parallel communication, `nvshmem` for NVSHMEM's stream collectives.

use super::rules::{is_nccl, is_point_to_point};

/// The role of tensor-parallel communication named by its library (userbuffers, custom
/// all-reduce), when no NVTX says more.
pub const TP_COMM: &str = "tp_comm";

/// The role of an expert-parallel all-to-all (also what framework NVTX names it).
pub const EP_A2A: &str = "ep_a2a";

/// The role of NVSHMEM's stream collectives (all-to-all, reductions, gathers, barriers) named
/// by their library, when no NVTX says more.
pub const NVSHMEM: &str = "nvshmem";

/// A library whose kernels move data between GPUs, other than NCCL.
#[derive(Debug, Clone, Copy)]
pub struct Library {
    /// Its name, as the outputs and docs give it.
    pub name: &'static str,
    /// The role its kernels get by name.
    pub role: &'static str,
    /// A real kernel name it runs (the full demangled name), checked by a test.
    pub example: &'static str,
    /// Where the names come from.
    pub source: &'static str,
    /// Whether a kernel of this library, by short and full name, is one of its transfers.
    matches: fn(&str, &str) -> bool,
    /// Whether a kernel of this library (by short name) spins until its peers arrive, as
    /// NCCL's point-to-point kernels do: on a compute stream it is then its role, not a
    /// barrier.
    point_to_point: fn(&str) -> bool,
}

/// The libraries, tried in order after NCCL's own names.
pub const LIBRARIES: &[Library] = &[
    Library {
        name: "DeepEP",
        role: EP_A2A,
        example: "void deep_ep::internode_ll::dispatch<(bool)1, (int)3, (int)7168>(void *, float *, int *, long *, void *, int *, void *, int *, void *, const void *, const long *, int *, int *, int, int, int, int, int, int, int, int, bool)",
        source: "deepseek-ai/DeepEP csrc/kernels/{intranode,internode,internode_ll}.cu: \
                 notify_dispatch, cached_notify_dispatch, dispatch, cached_notify(_combine), \
                 combine, clean_low_latency_buffer; ROCm's primus_turbo::deep_ep",
        matches: deep_ep,
        point_to_point: |_| true,
    },
    Library {
        name: "Transformer Engine userbuffers",
        role: TP_COMM,
        example: "userbuffers_fp16_sum_inplace_gpu_rr_rs",
        source: "NVIDIA/TransformerEngine transformer_engine/common/comm_gemm_overlap/\
                 userbuffers/userbuffers.cu: userbuffers_* (all-gather, reduce-scatter), \
                 kuserbuffers_* (push/pull transfers)",
        matches: |short, _| short.starts_with("userbuffers_") || short.starts_with("kuserbuffers_"),
        point_to_point: |short| short.starts_with("kuserbuffers_"),
    },
    Library {
        name: "custom all-reduce",
        role: TP_COMM,
        example: "void vllm::cross_device_reduce_1stage<__nv_bfloat16, (int)8>(vllm::RankData *, vllm::RankSignals, vllm::Signal *, __nv_bfloat16 *, int, int)",
        source: "vllm-project/vllm csrc/custom_all_reduce.cuh (also SGLang's copy): \
                 cross_device_reduce_1stage, cross_device_reduce_2stage; the tensor-parallel \
                 all-reduce of inference engines",
        matches: |short, _| short.starts_with("cross_device_reduce"),
        point_to_point: |_| false,
    },
    Library {
        name: "TensorRT-LLM MoE all-to-all",
        role: EP_A2A,
        example: "moeA2ADispatchKernel",
        source: "NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/communicationKernels/\
                 moeAlltoAllKernels.cu: moeA2ADispatchKernel, moeA2ACombineKernel",
        matches: |short, _| short.starts_with("moeA2A"),
        point_to_point: |_| true,
    },
    Library {
        name: "PyTorch symmetric memory (NVSHMEM)",
        role: EP_A2A,
        example: "c10d::nvshmem_extension::allToAllV(void *, void *, long *, unsigned long, int)",
        source: "pytorch/pytorch torch/csrc/distributed/c10d/symm_mem/nvshmem_extension.cu: \
                 exchangeSplitAndOffsetKernel, allToAllV, exchangeSplitAndOffset_2d, \
                 allToAllV_2d (torch.ops.symm_mem.all_to_all_vdev(_2d), the MoE token \
                 all-to-all of torchtitan)",
        matches: |short, name| {
            name.contains("nvshmem_extension::")
                && (short.starts_with("allToAllV") || short.starts_with("exchangeSplitAndOffset"))
        },
        point_to_point: |_| true,
    },
    Library {
        name: "NVSHMEM collectives",
        role: NVSHMEM,
        example: "void alltoall_on_stream_kernel<float>(int, float *, const float *, unsigned long)",
        source: "NVIDIA NVSHMEM 3.x, the kernels nvshmemx_*_on_stream launches \
                 (non_abi/device/coll): alltoall_, rdxn_, reducescatter_, fcollect_, \
                 broadcast_, barrier_, sync_ and sync_all_on_stream_kernel (and their _warp, \
                 _block, _threadgroup forms)",
        matches: |short, _| short.contains("_on_stream_kernel"),
        point_to_point: |_| false,
    },
    Library {
        name: "XLA ragged all-to-all",
        role: EP_A2A,
        example: "RaggedAllToAllKernelImpl",
        source: "openxla/xla xla/service/gpu/kernels (RaggedAllToAllKernelImpl): the MoE token \
                 all-to-all of MaxText's ragged dispatch",
        matches: |short, _| short.contains("RaggedAllToAll"),
        point_to_point: |_| true,
    },
];

/// Short names of DeepEP's kernels carry one of these words; only then is the full name looked
/// at (a DeepEP kernel's short name has no namespace: `dispatch`).
const DEEP_EP_WORDS: &[&str] = &["dispatch", "combine", "notify", "clean_low_latency"];

/// DeepEP's transfers: a kernel in the `deep_ep` namespace whose name says it moves tokens.
/// `get_dispatch_layout` only counts tokens per rank: it is routing compute, not a transfer.
fn deep_ep(short: &str, name: &str) -> bool {
    DEEP_EP_WORDS.iter().any(|w| short.contains(w))
        && !short.contains("layout")
        && name.contains("deep_ep::")
}

/// A communication kernel: whose it is, and whether it spins until its peers arrive.
#[derive(Debug, Clone, Copy)]
pub struct CommKind {
    /// `None` for NCCL (and RCCL), else the library.
    pub library: Option<&'static Library>,
    /// Whether it spins until its peers arrive (NCCL's `SendRecv`, DeepEP's dispatch).
    pub point_to_point: bool,
}

/// Whether the kernel with this short name and full demangled name (the short name again where
/// there is no other) moves data between GPUs, and how.
pub fn comm_kind(short: &str, name: &str) -> Option<CommKind> {
    let short = short.strip_suffix(".kd").unwrap_or(short);
    if is_nccl(short) {
        return Some(CommKind {
            library: None,
            point_to_point: is_point_to_point(short),
        });
    }
    let library = LIBRARIES.iter().find(|l| (l.matches)(short, name))?;
    Some(CommKind {
        library: Some(library),
        point_to_point: (library.point_to_point)(short),
    })
}

/// Whether the kernel moves data between GPUs ([`comm_kind`]).
pub fn is_comm(short: &str, name: &str) -> bool {
    comm_kind(short, name).is_some()
}

/// Whether `k` moves data between GPUs, by its names in `timeline`.
pub fn is_comm_kernel(timeline: &crate::model::Timeline, k: &crate::model::Kernel) -> bool {
    is_comm(timeline.text(k.short_name), timeline.text(k.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::export::short_name;

    #[test]
    fn every_library_names_its_example() {
        for l in LIBRARIES {
            let kind = comm_kind(short_name(l.example), l.example);
            let library = kind.and_then(|k| k.library).map(|l| l.name);
            assert_eq!(library, Some(l.name));
        }
    }

    /// Names from the sources each library's table cites, and NCCL's symmetric kernels
    /// (NVIDIA/nccl src/device/symmetric/generate.py, NCCL 2.27).
    #[test]
    fn transfers_are_communication_and_their_neighbours_are_not() {
        let comm = [
            "void deep_ep::intranode::notify_dispatch<(int)8>(const int *, int *, int, const int *, int *, int, int, int, const bool *, int *, int *, int, int, int, void **, int **, int)",
            "void deep_ep::intranode::combine<__nv_bfloat16, (int)8, (int)768>(int4 *, float *, const int4 *, const float *, const bool *, const int *, const int *, const int *, const int *, int, int, int, int, void **, int, int, int, int)",
            "void deep_ep::internode::cached_notify<(int)8>(int, int, int, int, int, int *, int *, void *, int *, int *, int, int, void **, int **, bool)",
            "void deep_ep::internode_ll::clean_low_latency_buffer<(int)32>(int *, int, int *, int)",
            "void primus_turbo::deep_ep::intranode::dispatch<(int)8, (int)768, (int)8192>(int4 *, float *, int *, long *, float *, int *, int *, const int4 *, const float *, const long *, const float *, const bool *, const int *, int, int, int, int, int, int, int, void **, int, int, int, int)",
            "kuserbuffers_pushsendrecv",
            "userbuffers_fp16_sum_inplace_gpu_rr_ag",
            "cross_device_reduce_2stage",
            "moeA2ACombineKernel",
            "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_bf16",
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)",
            "ncclDevKernel_AllGather_RING_LL.kd",
            "c10d::nvshmem_extension::exchangeSplitAndOffsetKernel(long *, long *, long *, int)",
            "void c10d::nvshmem_extension::allToAllV_2d<(bool)1>(void *, void *, long *, long *, unsigned long, int, unsigned long, int)",
            "void rdxn_on_stream_kernel<float, (rdxn_ops)0>(int, float *, const float *, unsigned long)",
            "void barrier_on_stream_kernel_threadgroup<(threadgroup_t)2>(int, int)",
            "sync_all_on_stream_kernel_block()",
        ];
        for name in comm {
            assert!(is_comm(short_name(name), name), "{name}");
        }
        let compute = [
            "void deep_ep::layout::get_dispatch_layout<(int)256, (int)32, (int)8>(const long *, int *, int *, int *, bool *, int, int, int, int)",
            "void at::native::index_elementwise_kernel<(int)128, (int)4, dispatch_fn>(long, T3)",
            "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(T1::Params)",
            "combine_kernel",
            "allToAllV",
        ];
        for name in compute {
            assert!(!is_comm(short_name(name), name), "{name}");
        }
    }

    #[test]
    fn spinning_kernels_are_point_to_point() {
        let p2p = |n: &str| comm_kind(short_name(n), n).map(|k| k.point_to_point);
        assert_eq!(p2p("ncclDevKernel_SendRecv"), Some(true));
        assert_eq!(p2p("ncclSymkDevKernel_AllGather_LL"), Some(false));
        assert_eq!(p2p("kuserbuffers_pullsend"), Some(true));
        assert_eq!(p2p("userbuffers_fp16_sum_inplace_gpu_rr_rs"), Some(false));
        assert_eq!(p2p(LIBRARIES[0].example), Some(true));
    }
}
