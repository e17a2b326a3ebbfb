//! Kernels a synthetic training step launches, with real-looking short and demangled names and
//! launch shapes (names as nsys records them for cuBLAS, FlashAttention, PyTorch and NCCL >= 2.18).

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
}

const fn kernel(
    short: &'static str,
    demangled: &'static str,
    grid: [u32; 3],
    block: [u32; 3],
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
    }
}

const fn nccl(short: &'static str, demangled: &'static str) -> KernelKind {
    KernelKind {
        short,
        demangled,
        mangled: None,
        grid: [16, 1, 1],
        block: [640, 1, 1],
        registers: 96,
        shared: 0,
        nccl: true,
    }
}

/// bf16 GEMM (cuBLAS, Hopper).
pub const GEMM_BF16: KernelKind = KernelKind {
    shared: 232_448,
    registers: 168,
    ..kernel(
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        [132, 1, 1],
        [384, 1, 1],
    )
};
/// fp32 GEMM (cuBLAS, Ampere SIMT).
pub const GEMM_FP32: KernelKind = KernelKind {
    shared: 49_152,
    ..kernel(
        "ampere_sgemm_128x64_tn",
        "ampere_sgemm_128x64_tn",
        [64, 16, 1],
        [128, 1, 1],
    )
};
/// FlashAttention forward.
pub const FLASH_FWD: KernelKind = KernelKind {
    shared: 98_304,
    registers: 255,
    ..kernel(
        "flash_fwd_kernel",
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, cutlass::bfloat16_t>>, (bool)1, (bool)0, (bool)0, (bool)0, (bool)0, (bool)1, (bool)0, (bool)0>(Flash_fwd_params)",
        [16, 32, 1],
        [128, 1, 1],
    )
};
/// FlashAttention backward.
pub const FLASH_BWD: KernelKind = KernelKind {
    shared: 147_456,
    registers: 255,
    ..kernel(
        "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
        "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<(int)128, (int)64, (int)128, (int)8, (int)2, (int)4, (int)2, (bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)64, (int)128, (int)8, cutlass::bfloat16_t>>, (bool)1, (bool)0, (bool)0, (bool)0, (bool)0, (bool)1, (bool)0>(Flash_bwd_params)",
        [32, 32, 1],
        [256, 1, 1],
    )
};
/// Element-wise op (PyTorch).
pub const ELEMENTWISE: KernelKind = KernelKind {
    mangled: Some(
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIN3c108BFloat16EEESt5arrayIPcLm1EEEEviT0_T1_",
    ),
    registers: 24,
    ..kernel(
        "vectorized_elementwise_kernel",
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<c10::BFloat16>, std::array<char *, (unsigned long)1>>(int, T2, T3)",
        [1024, 1, 1],
        [128, 1, 1],
    )
};
/// Reduction (PyTorch).
pub const REDUCE: KernelKind = KernelKind {
    registers: 40,
    shared: 16,
    ..kernel(
        "reduce_kernel",
        "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, (int)4, (int)4>>(T3)",
        [128, 1, 1],
        [32, 16, 1],
    )
};
/// Layer norm (PyTorch).
pub const LAYER_NORM: KernelKind = KernelKind {
    registers: 32,
    ..kernel(
        "vectorized_layer_norm_kernel",
        "void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, T2, const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)",
        [4096, 1, 1],
        [128, 1, 1],
    )
};
/// Fused optimizer step (PyTorch multi-tensor apply).
pub const OPTIMIZER: KernelKind = KernelKind {
    registers: 64,
    ..kernel(
        "multi_tensor_apply_kernel",
        "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<(int)4>, at::native::<unnamed>::FusedAdamMathFunctor<float, (int)4, (at::native::ADAM_MODE)1, (bool)0>, bool *, float *, double, double, double, double, double, bool, const float *, const float *>(T1, T2, T3...)",
        [320, 1, 1],
        [512, 1, 1],
    )
};
/// NCCL point-to-point (also all-to-all).
pub const NCCL_SENDRECV: KernelKind = nccl(
    "ncclDevKernel_SendRecv",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)",
);
/// NCCL bf16 all-reduce.
pub const NCCL_ALLREDUCE_BF16: KernelKind = nccl(
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
);
/// NCCL fp32 all-reduce.
pub const NCCL_ALLREDUCE_F32: KernelKind = nccl(
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
);
/// NCCL small integer all-reduce (metadata exchanges, "barriers").
pub const NCCL_ALLREDUCE_U32: KernelKind = nccl(
    "ncclDevKernel_AllReduce_Sum_u32_RING_LL",
    "ncclDevKernel_AllReduce_Sum_u32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
);
/// NCCL all-gather.
pub const NCCL_ALLGATHER: KernelKind = nccl(
    "ncclDevKernel_AllGather_RING_LL",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
);
/// NCCL bf16 reduce-scatter.
pub const NCCL_REDUCESCATTER_BF16: KernelKind = nccl(
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
);
