//! Hand-built exports: the schema of a committed fixture with its events replaced by rows written
//! here, one by one, so every expected number can be worked out by hand. The SQL is written
//! independently of the library (global ids, string ids and event types spelled out).

use crate::util::damaged_copy;
use std::path::PathBuf;

/// Tables whose rows a scenario replaces.
const EVENT_TABLES: &[&str] = &[
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
];

/// The fixture whose schema and metadata scenarios reuse (host `node0`, pids 41207 and 41220).
const BASE: &str = "pithtrain_pp2_ep2/node0.sqlite";

/// The first rank's pid in the base fixture, and its autograd thread.
pub const PID: u32 = 41207;
/// A second thread of [`PID`].
pub const AUTOGRAD: u32 = 41236;

/// SQL that rebuilds a fixture's events.
pub struct Scenario {
    sql: String,
    next_string: i64,
}

/// `globalTid` as nsys encodes it (hardware id 1 in the high bits).
fn global_tid(pid: u32, tid: u32) -> i64 {
    (1i64 << 48) | (i64::from(pid) << 24) | i64::from(tid)
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

impl Scenario {
    /// An export with no events.
    pub fn new() -> Scenario {
        let sql = EVENT_TABLES
            .iter()
            .map(|t| format!("DELETE FROM {t};\n"))
            .collect();
        Scenario {
            sql,
            next_string: 10_000,
        }
    }

    fn string(&mut self, text: &str) -> i64 {
        self.next_string += 1;
        self.sql += &format!(
            "INSERT INTO StringIds (id, value) VALUES ({}, {});\n",
            self.next_string,
            quote(text)
        );
        self.next_string
    }

    /// A push/pop range on thread `tid` of `pid` (inline text).
    pub fn range(&mut self, (pid, tid): (u32, u32), start: i64, end: i64, text: &str) -> &mut Self {
        self.sql += &format!(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) \
             VALUES ({start}, {end}, 59, {}, {}, 0);\n",
            quote(text),
            global_tid(pid, tid)
        );
        self
    }

    /// A kernel on `stream` of device `device`, launched with correlation id `correlation`.
    pub fn kernel(
        &mut self,
        (pid, device, stream): (u32, u32, u32),
        (start, end): (i64, i64),
        name: &str,
        correlation: u32,
    ) -> &mut Self {
        let id = self.string(name);
        self.sql += &format!(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, \
             correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY, \
             gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, \
             localMemoryPerThread, localMemoryTotal, gridId, tensorSizeMinusOneElements) VALUES \
             ({start}, {end}, {device}, 1, {stream}, {correlation}, {}, {id}, {id}, 32, 1, 1, 1, \
             128, 1, 1, 0, 0, 0, 0, {correlation}, '[]');\n",
            global_tid(pid, 0)
        );
        self
    }

    /// A memory copy of `bytes` on `stream` of device `device`, of `ENUM_CUDA_MEMCPY_OPER` kind
    /// `kind` (1 host-to-device, 8 device-to-device, 10 peer-to-peer), launched with correlation
    /// id `correlation`.
    pub fn copy(
        &mut self,
        (pid, device, stream): (u32, u32, u32),
        (start, end): (i64, i64),
        (kind, bytes): (u32, u64),
        correlation: u32,
    ) -> &mut Self {
        self.sql += &format!(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, \
             correlationId, globalPid, bytes, copyKind, srcKind, dstKind, srcDeviceId, \
             dstDeviceId) VALUES ({start}, {end}, {device}, 1, {stream}, {correlation}, {}, \
             {bytes}, {kind}, 2, 2, {device}, {});\n",
            global_tid(pid, 0),
            device + 1
        );
        self
    }

    /// The CUDA API call (on thread `tid` of `pid`) that launched correlation id `correlation`.
    pub fn launch(&mut self, thread: (u32, u32), start: i64, correlation: u32) -> &mut Self {
        self.launch_returning(thread, start, correlation, 0)
    }

    /// As [`Scenario::launch`], the call returning `code` (0 success, 700 an illegal address).
    pub fn launch_returning(
        &mut self,
        (pid, tid): (u32, u32),
        start: i64,
        correlation: u32,
        code: i64,
    ) -> &mut Self {
        let name = self.string("cudaLaunchKernel_v7000");
        self.sql += &format!(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, \
             correlationId, nameId, returnValue) VALUES ({start}, {}, 0, {}, {correlation}, \
             {name}, {code});\n",
            start + 5,
            global_tid(pid, tid)
        );
        self
    }

    /// Writes the export into a temporary directory (kept alive by the returned guard).
    pub fn write(&self) -> (tempfile::TempDir, PathBuf) {
        damaged_copy(BASE, &self.sql)
    }
}

/// The worked example of `tests/analyses.rs`: one rank (pid 41207) with a label, three
/// overlapped chunks (the median is `[3000, 9000]`), stage ranges on the main thread, launches
/// from the main and the autograd thread, and kernels on eight streams.
pub fn worked_example() -> Scenario {
    let main = (PID, PID);
    let autograd = (PID, AUTOGRAD);
    let mut s = Scenario::new();
    s.range(main, -50, -10, "ncclCommInitRank")
        .range(main, 100, 100_000, LABEL)
        .range(main, 200, 900, "forward chunk 9 (phase0)")
        .range(
            main,
            1000,
            2000,
            "forward chunk 0 (phase0) backward chunk 0 (phase1)",
        )
        .range(main, 3000, 9000, CHUNK)
        .range(
            main,
            10_000,
            11_000,
            "forward chunk 2 (phase0) backward chunk 1 (phase1)",
        )
        .range(main, 3010, 3090, "layer00.stage2_b")
        .range(main, 3100, 3200, "layer00.stage2_f")
        .range(main, 3300, 3400, "layer00.stage4_b")
        .range(main, 3500, 3600, "layer01_stage5_f_layer02_stage1_f")
        .range(main, 3700, 3800, "pipeline send/recv")
        .range(main, 3900, 4000, "loss1.backward()")
        .range(main, 6450, 6550, "layer03.stage2_f");
    let gpu = |stream| (PID, 0, stream);
    // Compute: C1, C2 and C4 on stream 7, C3 on stream 8, one kernel before the window.
    s.kernel(gpu(7), (2000, 2500), "elementwise_kernel", 1)
        .launch(main, 1500, 1)
        .kernel(gpu(7), (4000, 5000), "sm90_xmma_gemm_bf16", 2)
        .launch(main, 3610, 2)
        .kernel(gpu(7), (5500, 6000), "flash_fwd_kernel", 3)
        .launch(main, 3620, 3)
        .kernel(gpu(8), (4800, 5200), "vectorized_elementwise_kernel", 4)
        .launch(main, 3630, 4)
        .kernel(gpu(7), (8900, 9100), "sm90_xmma_gemm_bf16", 5)
        .launch(main, 3640, 5);
    // B1: NCCL on the compute stream (barrier), launched in the fused stage-1 range.
    s.kernel(
        gpu(7),
        (6000, 6100),
        "ncclDevKernel_AllReduce_Sum_u32_RING_LL",
        6,
    )
    .launch(main, 3520, 6);
    // Communication streams.
    s.kernel(gpu(20), (4500, 5600), SENDRECV, 10) // K1 stage2_f
        .launch(main, 3150, 10)
        .kernel(gpu(20), (6000, 6400), SENDRECV, 11) // K2 stage4_b, from the autograd thread
        .launch(autograd, 3350, 11)
        .kernel(gpu(20), (8950, 9050), SENDRECV, 12) // K9 stage2_f, straddles the window end
        .launch(main, 3160, 12)
        .kernel(gpu(24), (5000, 5800), SENDRECV, 13) // K6 stage2_b, from the autograd thread
        .launch(autograd, 3050, 13)
        .kernel(gpu(24), (8000, 8200), SENDRECV, 14) // K7: no runtime row
        .kernel(gpu(28), (3900, 4100), SENDRECV, 15) // K3 fused stage5_f/stage1_f
        .launch(main, 3550, 15)
        .kernel(gpu(32), (7000, 7500), SENDRECV, 16) // K4 pipeline send/recv
        .launch(main, 3750, 16)
        .kernel(gpu(36), (7200, 7300), SENDRECV, 17) // K5 loss1.backward()
        .launch(main, 3950, 17)
        .kernel(
            gpu(40),
            (6500, 6600),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            18,
        ) // K8
        .launch(main, 0, 18); // launched "at 0": PithTrain falls back to the GPU start
    s
}

/// The worked example's rank label.
pub const LABEL: &str = "rank=0; pp=0/1 dp=0/1 cp=0/1 ep=0/2; mbs=1 seq=8";
/// The worked example's median chunk.
pub const CHUNK: &str = "forward chunk 1 (phase0) backward chunk 0 (phase1)";
const SENDRECV: &str = "ncclDevKernel_SendRecv";
