//! Kernels a synthetic training step launches, with real-looking short and demangled names and
//! launch shapes (names as nsys records them for cuBLAS, FlashAttention, PyTorch and NCCL >= 2.18),
//! and the names today's stacks give the same work ([`Names`]): cuBLASLt's `nvjet_*`,
//! FlashAttention 3, Inductor's Triton kernels; on ROCm, Tensile's `Cijk_*` and CK's FMHA.

/// One kind of kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelKind {
    /// `shortName`.
    pub short: &'static str,
    /// `demangledName`.
    pub demangled: &'static str,
    /// `mangledName`, when the kernel has a C++ one.
    pub mangled: Option<&'static str>,
    /// Grid.
    pub grid: [u32; 3],
    /// Block.
    pub block: [u32; 3],
    /// Registers per thread.
    pub registers: u32,
    /// Dynamic shared memory, bytes.
    pub shared: u32,
    /// Whether NCCL launches it (through `cuLaunchKernelEx`).
    pub nccl: bool,
    /// Whether it is a transfer that spins until its peers arrive (NCCL's `SendRecv`, DeepEP):
    /// on a compute stream it keeps its role instead of being a barrier.
    pub point_to_point: bool,
    /// The family `kernels` must give it, by what its name says (`gemm_unknown` where the name
    /// does not say the precision); an NCCL kernel's is its collective (`nccl:AllReduce`),
    /// which its role replaces where the capture says more.
    pub family: &'static str,
}

const fn kernel(
    (short, demangled): (&'static str, &'static str),
    grid: [u32; 3],
    block: [u32; 3],
    family: &'static str,
) -> KernelKind {
    KernelKind {
        short,
        demangled,
        mangled: None,
        grid,
        block,
        registers: 128,
        shared: 0,
        nccl: false,
        point_to_point: false,
        family,
    }
}

const fn nccl(short: &'static str, demangled: &'static str, family: &'static str) -> KernelKind {
    KernelKind {
        short,
        demangled,
        mangled: None,
        grid: [16, 1, 1],
        block: [640, 1, 1],
        registers: 96,
        shared: 0,
        nccl: true,
        point_to_point: false,
        family,
    }
}

/// bf16 GEMM (cuBLAS, Hopper).
pub const GEMM_BF16: KernelKind = KernelKind {
    shared: 232_448,
    registers: 168,
    ..kernel(
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        ),
        [132, 1, 1],
        [384, 1, 1],
        "gemm_bf16_fp16",
    )
};
/// fp32 GEMM (cuBLAS, Ampere SIMT).
pub const GEMM_FP32: KernelKind = KernelKind {
    shared: 49_152,
    ..kernel(
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),
        [64, 16, 1],
        [128, 1, 1],
        "gemm_fp32_tf32",
    )
};
/// FlashAttention forward.
pub const FLASH_FWD: KernelKind = KernelKind {
    shared: 98_304,
    registers: 255,
    ..kernel(
        (
            "flash_fwd_kernel",
            "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, cutlass::bfloat16_t>>, (bool)1, (bool)0, (bool)0, (bool)0, (bool)0, (bool)1, (bool)0, (bool)0>(Flash_fwd_params)",
        ),
        [16, 32, 1],
        [128, 1, 1],
        "attention_fwd",
    )
};
/// FlashAttention backward.
pub const FLASH_BWD: KernelKind = KernelKind {
    shared: 147_456,
    registers: 255,
    ..kernel(
        (
            "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
            "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<(int)128, (int)64, (int)128, (int)8, (int)2, (int)4, (int)2, (bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)64, (int)128, (int)8, cutlass::bfloat16_t>>, (bool)1, (bool)0, (bool)0, (bool)0, (bool)0, (bool)1, (bool)0>(Flash_bwd_params)",
        ),
        [32, 32, 1],
        [256, 1, 1],
        "attention_bwd",
    )
};
/// Element-wise op (PyTorch).
pub const ELEMENTWISE: KernelKind = KernelKind {
    mangled: Some(
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIN3c108BFloat16EEESt5arrayIPcLm1EEEEviT0_T1_",
    ),
    registers: 24,
    ..kernel(
        (
            "vectorized_elementwise_kernel",
            "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<c10::BFloat16>, std::array<char *, (unsigned long)1>>(int, T2, T3)",
        ),
        [1024, 1, 1],
        [128, 1, 1],
        "elementwise",
    )
};
/// Reduction (PyTorch).
pub const REDUCE: KernelKind = KernelKind {
    registers: 40,
    shared: 16,
    ..kernel(
        (
            "reduce_kernel",
            "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, (int)4, (int)4>>(T3)",
        ),
        [128, 1, 1],
        [32, 16, 1],
        "reduction",
    )
};
/// Layer norm (PyTorch).
pub const LAYER_NORM: KernelKind = KernelKind {
    registers: 32,
    ..kernel(
        (
            "vectorized_layer_norm_kernel",
            "void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, T2, const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)",
        ),
        [4096, 1, 1],
        [128, 1, 1],
        "normalization",
    )
};
/// Fused optimizer step (PyTorch multi-tensor apply).
pub const OPTIMIZER: KernelKind = KernelKind {
    registers: 64,
    ..kernel(
        (
            "multi_tensor_apply_kernel",
            "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<(int)4>, at::native::<unnamed>::FusedAdamMathFunctor<float, (int)4, (at::native::ADAM_MODE)1, (bool)0>, bool *, float *, double, double, double, double, double, bool, const float *, const float *>(T1, T2, T3...)",
        ),
        [320, 1, 1],
        [512, 1, 1],
        "optimizer",
    )
};
/// NCCL point-to-point (also all-to-all).
pub const NCCL_SENDRECV: KernelKind = KernelKind {
    point_to_point: true,
    ..nccl(
        "ncclDevKernel_SendRecv",
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        "nccl:SendRecv",
    )
};
/// NCCL bf16 all-reduce.
pub const NCCL_ALLREDUCE_BF16: KernelKind = nccl(
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
    "nccl:AllReduce",
);
/// NCCL fp32 all-reduce.
pub const NCCL_ALLREDUCE_F32: KernelKind = nccl(
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
    "nccl:AllReduce",
);
/// NCCL small integer all-reduce (metadata exchanges, "barriers").
pub const NCCL_ALLREDUCE_U32: KernelKind = nccl(
    "ncclDevKernel_AllReduce_Sum_u32_RING_LL",
    "ncclDevKernel_AllReduce_Sum_u32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
    "nccl:AllReduce",
);
/// NCCL all-gather.
pub const NCCL_ALLGATHER: KernelKind = nccl(
    "ncclDevKernel_AllGather_RING_LL",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
    "nccl:AllGather",
);
/// NCCL bf16 reduce-scatter.
pub const NCCL_REDUCESCATTER_BF16: KernelKind = nccl(
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
    "nccl:ReduceScatter",
);

/// DeepEP's intranode dispatch (deepseek-ai/DeepEP csrc/kernels/intranode.cu): the MoE
/// dispatch all-to-all without NCCL, launched by DeepEP itself; its name says `ep_a2a`.
pub const DEEP_EP_DISPATCH: KernelKind = KernelKind {
    point_to_point: true,
    shared: 0,
    ..kernel(
        (
            "dispatch",
            "void deep_ep::intranode::dispatch<(int)8, (int)768, (int)8192>(int4 *, float *, int *, long *, float *, int *, int *, const int4 *, const float *, const long *, const float *, const bool *, const int *, int, int, int, int, int, int, int, void **, int, int, int, int)",
        ),
        [24, 1, 1],
        [768, 1, 1],
        "ep_a2a",
    )
};
/// DeepEP's intranode combine.
pub const DEEP_EP_COMBINE: KernelKind = KernelKind {
    point_to_point: true,
    ..kernel(
        (
            "combine",
            "void deep_ep::intranode::combine<__nv_bfloat16, (int)8, (int)768>(int4 *, float *, const int4 *, const float *, const bool *, const int *, const int *, const int *, const int *, int, int, int, int, void **, int, int, int, int)",
        ),
        [24, 1, 1],
        [768, 1, 1],
        "ep_a2a",
    )
};
/// Transformer Engine's userbuffers all-reduce (comm-GEMM overlap: TransformerEngine
/// transformer_engine/common/comm_gemm_overlap/userbuffers/userbuffers.cu); its name says
/// tensor-parallel communication (`tp_comm`).
pub const USERBUFFERS_ALLREDUCE: KernelKind = kernel(
    (
        "userbuffers_fp16_sum_inplace_gpu_rr",
        "void userbuffers_fp16_sum_inplace_gpu_rr<(int)2>(int, int, int, int, int, unsigned long, int, void **, int, int *, int)",
    ),
    [8, 1, 1],
    [1024, 1, 1],
    "tp_comm",
);

/// Whose kernel names a synthetic run writes: the same work, named as each stack names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Names {
    /// cuBLAS `sm90_xmma_gemm_*`/`ampere_sgemm_*`, FlashAttention 2, PyTorch's eager kernels.
    #[default]
    Y2022,
    /// cuBLASLt `nvjet_*`, FlashAttention 3, Inductor's `triton_poi/red/per_*` (torch 2.11 on
    /// an H200: `../shared/real-data/gpu/torch_mlp_compiled_h200.json.gz`).
    Y2026,
    /// ROCm: Tensile's `Cijk_*` GEMMs, Composable Kernel's FMHA, Inductor's Triton kernels,
    /// RCCL (NCCL's names).
    Rocm,
}

impl Names {
    /// `kind` under these names: the kernel the stack runs for the same work.
    pub fn apply(self, kind: &KernelKind) -> &KernelKind {
        let table: &[(&KernelKind, &KernelKind)] = match self {
            Names::Y2022 => return kind,
            Names::Y2026 => &TODAY,
            Names::Rocm => &ROCM,
        };
        table
            .iter()
            .find(|(base, _)| base.short == kind.short)
            .map_or(kind, |&(_, renamed)| renamed)
    }
}

/// 2022's kernels and today's for the same work (NCCL >= 2.27 runs its all-reduces,
/// all-gathers and reduce-scatters as symmetric-memory kernels where buffers are registered).
static TODAY: [(&KernelKind, &KernelKind); 12] = [
    (&NCCL_ALLREDUCE_BF16, &SYMK_ALLREDUCE_BF16),
    (&NCCL_ALLREDUCE_F32, &SYMK_ALLREDUCE_F32),
    (&NCCL_ALLREDUCE_U32, &SYMK_ALLREDUCE_U32),
    (&NCCL_ALLGATHER, &SYMK_ALLGATHER),
    (&NCCL_REDUCESCATTER_BF16, &SYMK_REDUCESCATTER_BF16),
    (&GEMM_BF16, &NVJET_BF16),
    (&GEMM_FP32, &SM80_SGEMM),
    (&FLASH_FWD, &FA3_FWD),
    (&FLASH_BWD, &FA3_BWD),
    (&ELEMENTWISE, &TRITON_POINTWISE),
    (&REDUCE, &TRITON_REDUCTION),
    (&LAYER_NORM, &TRITON_LAYER_NORM),
];

/// 2022's kernels and ROCm's for the same work.
static ROCM: [(&KernelKind, &KernelKind); 7] = [
    (&GEMM_BF16, &TENSILE_BF16),
    (&GEMM_FP32, &TENSILE_FP32),
    (&FLASH_FWD, &CK_FMHA_FWD),
    (&FLASH_BWD, &CK_FMHA_BWD),
    (&ELEMENTWISE, &TRITON_POINTWISE),
    (&REDUCE, &TRITON_REDUCTION),
    (&LAYER_NORM, &TRITON_LAYER_NORM),
];

/// NCCL 2.27's symmetric-memory kernels (NVIDIA/nccl src/device/symmetric/generate.py names
/// them `ncclSymkDevKernel_<Collective>_<algorithm>[_<op>_<type>]`).
const SYMK_ALLREDUCE_BF16: KernelKind = symk(
    "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_bf16",
    "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_bf16(ncclSymkDevWorkArgs4K)",
    "nccl:AllReduce",
);
const SYMK_ALLREDUCE_F32: KernelKind = symk(
    "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f32",
    "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f32(ncclSymkDevWorkArgs4K)",
    "nccl:AllReduce",
);
const SYMK_ALLREDUCE_U32: KernelKind = symk(
    "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_u32",
    "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_u32(ncclSymkDevWorkArgs4K)",
    "nccl:AllReduce",
);
const SYMK_ALLGATHER: KernelKind = symk(
    "ncclSymkDevKernel_AllGather_LL",
    "ncclSymkDevKernel_AllGather_LL(ncclSymkDevWorkArgs4K)",
    "nccl:AllGather",
);
const SYMK_REDUCESCATTER_BF16: KernelKind = symk(
    "ncclSymkDevKernel_ReduceScatter_LL_sum_bf16",
    "ncclSymkDevKernel_ReduceScatter_LL_sum_bf16(ncclSymkDevWorkArgs4K)",
    "nccl:ReduceScatter",
);

/// A symmetric-memory kernel (NCCL launches it as it does its others).
const fn symk(short: &'static str, demangled: &'static str, family: &'static str) -> KernelKind {
    KernelKind {
        grid: [32, 1, 1],
        block: [512, 1, 1],
        ..nccl(short, demangled, family)
    }
}

/// cuBLASLt's bf16 GEMM on Hopper, as torch 2.11 runs it (the name does not say bf16).
const NVJET_BF16: KernelKind = KernelKind {
    shared: 232_448,
    registers: 168,
    ..kernel(
        (
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
        ),
        [132, 1, 1],
        [384, 1, 1],
        "gemm_unknown",
    )
};
/// cuBLAS's fp32 GEMM as a 2026 capture on an H100 has it (nsysai_h100_2gpu_1s_2026.2.1).
const SM80_SGEMM: KernelKind = KernelKind {
    shared: 49_152,
    ..kernel(
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        ),
        [64, 16, 1],
        [128, 1, 1],
        "gemm_fp32_tf32",
    )
};
/// FlashAttention 3's forward (Dao-AILab/flash-attention, hopper/).
const FA3_FWD: KernelKind = KernelKind {
    shared: 196_608,
    registers: 168,
    ..kernel(
        (
            "device_kernel",
            "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<(int)2, cute::tuple<cute::C<(int)1>, cute::C<(int)1>, cute::C<(int)1>>, cute::tuple<cute::C<(int)128>, cute::C<(int)128>, cute::C<(int)128>>, (int)128, cutlass::bfloat16_t, float, cutlass::arch::Sm90>>>>(T1::Params)",
        ),
        [132, 1, 1],
        [384, 1, 1],
        "attention_fwd",
    )
};
/// FlashAttention 3's backward.
const FA3_BWD: KernelKind = KernelKind {
    shared: 212_992,
    registers: 168,
    ..kernel(
        (
            "device_kernel",
            "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<flash::CollectiveMainloopBwdSm90<(int)2, cute::tuple<cute::C<(int)1>, cute::C<(int)1>, cute::C<(int)1>>, cute::tuple<cute::C<(int)64>, cute::C<(int)128>, cute::C<(int)128>>, (int)128, cutlass::bfloat16_t, float, cutlass::arch::Sm90>>>>(T1::Params)",
        ),
        [132, 1, 1],
        [384, 1, 1],
        "attention_bwd",
    )
};
/// Inductor's fused pointwise kernel (torch_mlp_compiled_h200: `triton_poi_fused_gelu_0`).
const TRITON_POINTWISE: KernelKind = kernel(
    ("triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0"),
    [1024, 1, 1],
    [128, 1, 1],
    "elementwise",
);
/// Inductor's fused reduction (torch_mlp_compiled_h200: `triton_red_fused_sum_5`).
const TRITON_REDUCTION: KernelKind = kernel(
    ("triton_red_fused_sum_1", "triton_red_fused_sum_1"),
    [128, 1, 1],
    [256, 1, 1],
    "reduction",
);
/// Inductor's persistent reduction for a layer norm (torch_mlp_compiled_h200).
const TRITON_LAYER_NORM: KernelKind = kernel(
    (
        "triton_per_fused_native_layer_norm_2",
        "triton_per_fused_native_layer_norm_2",
    ),
    [4096, 1, 1],
    [256, 1, 1],
    "normalization",
);
/// hipBLASLt/Tensile's bf16 GEMM on an MI300X (the name's `BBS` is not read for precision).
const TENSILE_BF16: KernelKind = kernel(
    (
        "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_1LDSB1_AFC1_AFEM1_GRVW8_K1_NLCA1_WG32_8_1_WGM4",
        "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_1LDSB1_AFC1_AFEM1_GRVW8_K1_NLCA1_WG32_8_1_WGM4",
    ),
    [304, 1, 1],
    [256, 1, 1],
    "gemm_unknown",
);
/// hipBLASLt/Tensile's fp32 GEMM.
const TENSILE_FP32: KernelKind = kernel(
    (
        "Cijk_Ailk_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_AFC1_AFEM1_GRVW4_K1_NLCA1_WG32_8_1_WGM8",
        "Cijk_Ailk_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_AFC1_AFEM1_GRVW4_K1_NLCA1_WG32_8_1_WGM8",
    ),
    [304, 1, 1],
    [256, 1, 1],
    "gemm_unknown",
);
/// Composable Kernel's FMHA forward (ck_tile, as PyTorch's ROCm SDPA runs it).
const CK_FMHA_FWD: KernelKind = kernel(
    (
        "kentry",
        "void ck_tile::kentry<(int)256, (int)1, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<ck_tile::BlockFmhaPipelineProblem<ck_tile::bf16_t, ck_tile::bf16_t>>>>(ck_tile::FmhaFwdKernel::Kargs)",
    ),
    [304, 1, 1],
    [256, 1, 1],
    "attention_fwd",
);
/// Composable Kernel's FMHA backward.
const CK_FMHA_BWD: KernelKind = kernel(
    (
        "kentry",
        "void ck_tile::kentry<(int)256, (int)1, ck_tile::FmhaBwdDQDKDVKernel<ck_tile::BlockFmhaBwdDQDKDVPipelineKRKTRVR<ck_tile::BlockFmhaBwdPipelineProblem<ck_tile::bf16_t>>>>(ck_tile::FmhaBwdDQDKDVKernel::Kargs)",
    ),
    [304, 1, 1],
    [256, 1, 1],
    "attention_bwd",
);
