//! Each GPU's peak throughput, as data: dense (no sparsity) tensor TFLOP/s per precision, FP32
//! (non-tensor) TFLOP/s and HBM bandwidth, keyed by the product name the trace gives
//! (`TARGET_INFO_GPU`, Kineto's `deviceProperties`). The numbers are the vendors' datasheet
//! figures for the SXM/OAM parts unless the name says otherwise; sparsity figures are halved
//! where a datasheet gives only those. `mfu --peak-tflops` replaces them.
//!
//! Sources: NVIDIA V100 datasheet (2020); A100 datasheet (2021, 80 GB SXM); H100 datasheet
//! (2023, SXM5 and PCIe); H200 datasheet (2024, SXM); H20 product brief (2024); DGX B200 and
//! GB200 NVL72 datasheets (2024, per GPU); L40S datasheet (2023); AMD Instinct MI250X,
//! MI300X, MI325X and MI355X product pages (2021-2025).

/// A precision a peak is given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Precision {
    /// FP8 tensor operations.
    Fp8,
    /// BF16/FP16 tensor operations.
    Bf16,
    /// TF32 tensor operations (an FP32 GEMM on tensor cores).
    Tf32,
    /// FP32 without tensor cores.
    Fp32,
}

impl Precision {
    /// The precision of a kernel family: a GEMM's from its name (`gemm_bf16_fp16`), else BF16
    /// (attention and the others run at the model's precision).
    pub fn of_family(family: &str) -> Precision {
        match family {
            "gemm_fp8" => Precision::Fp8,
            "gemm_fp32_tf32" => Precision::Tf32,
            _ => Precision::Bf16,
        }
    }

    /// Its name in the outputs.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp8 => "fp8",
            Precision::Bf16 => "bf16",
            Precision::Tf32 => "tf32",
            Precision::Fp32 => "fp32",
        }
    }
}

/// One GPU's peaks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peaks {
    /// The product, as matched.
    pub name: &'static str,
    /// Dense TFLOP/s: FP8, BF16/FP16, TF32 tensor; FP32 (0 where the part has no such unit).
    pub tflops: [f64; 4],
    /// HBM bandwidth, TB/s.
    pub hbm_tbps: f64,
}

impl Peaks {
    /// The peak TFLOP/s for `precision` (an FP8 GEMM on a part without FP8 runs at BF16's).
    pub fn tflops(&self, precision: Precision) -> f64 {
        let [fp8, bf16, tf32, fp32] = self.tflops;
        match precision {
            Precision::Fp8 if fp8 > 0.0 => fp8,
            Precision::Fp8 | Precision::Bf16 => bf16,
            Precision::Tf32 => tf32,
            Precision::Fp32 => fp32,
        }
    }
}

/// The table, the more specific names first (a trace's name contains the key, ignoring case).
const TABLE: &[(&str, Peaks)] = &[
    ("GB200", peaks("GB200", [5000.0, 2500.0, 1250.0, 80.0], 8.0)),
    ("B200", peaks("B200", [4500.0, 2250.0, 1100.0, 75.0], 8.0)),
    ("H200", peaks("H200", [1978.9, 989.4, 494.7, 66.9], 4.8)),
    (
        "H100 PCIe",
        peaks("H100 PCIe", [1513.0, 756.0, 378.0, 51.0], 2.0),
    ),
    (
        "H100",
        peaks("H100 SXM", [1978.9, 989.4, 494.7, 66.9], 3.35),
    ),
    ("H20", peaks("H20", [296.0, 148.0, 74.0, 44.0], 4.0)),
    ("A100", peaks("A100", [0.0, 312.0, 156.0, 19.5], 2.039)),
    ("V100", peaks("V100", [0.0, 125.0, 0.0, 15.7], 0.9)),
    ("L40S", peaks("L40S", [733.0, 366.0, 183.0, 91.6], 0.864)),
    (
        "MI355X",
        peaks("MI355X", [5033.0, 2516.0, 1258.0, 157.3], 8.0),
    ),
    (
        "MI325X",
        peaks("MI325X", [2614.9, 1307.4, 653.7, 163.4], 6.0),
    ),
    (
        "MI300X",
        peaks("MI300X", [2614.9, 1307.4, 653.7, 163.4], 5.3),
    ),
    ("MI250X", peaks("MI250X", [0.0, 383.0, 0.0, 47.9], 3.2768)),
];

const fn peaks(name: &'static str, tflops: [f64; 4], hbm_tbps: f64) -> Peaks {
    Peaks {
        name,
        tflops,
        hbm_tbps,
    }
}

/// The peaks of the GPU named `device` (as the trace names it), when the table knows it.
pub fn of_device(device: &str) -> Option<Peaks> {
    let device = device.to_ascii_lowercase();
    TABLE
        .iter()
        .find(|(key, _)| device.contains(&key.to_ascii_lowercase()))
        .map(|(_, p)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_traces_give_them_find_their_part() {
        // The real H200 torch.profiler capture, the synthetic H100, nsys' PCIe and AMD names.
        assert_eq!(of_device("NVIDIA H200").unwrap().name, "H200");
        let h100 = of_device("NVIDIA H100 80GB HBM3").unwrap();
        assert_eq!(
            (h100.name, h100.tflops(Precision::Bf16)),
            ("H100 SXM", 989.4)
        );
        assert_eq!(of_device("NVIDIA H100 PCIe").unwrap().name, "H100 PCIe");
        assert_eq!(of_device("AMD Instinct MI300X").unwrap().name, "MI300X");
        assert_eq!(of_device("NVIDIA GB200").unwrap().name, "GB200");
        assert_eq!(of_device("Tesla T4"), None);
        // An FP8 GEMM on an A100 runs at its BF16 peak.
        assert_eq!(
            of_device("NVIDIA A100-SXM4-80GB")
                .unwrap()
                .tflops(Precision::Fp8),
            312.0
        );
    }
}
