//! The tables an export written here holds (a synthetic run, a translated trace), exactly as nsys 2026.2.1 (export schema 3.25.0) declares
//! them: names, column order, declared types, NOT NULL and PRIMARY KEY flags (reference:
//! nsys-sqlite.md Appendix A.1, and A.2 for the tables the 2026.2.1 samples lack; the OpenACC
//! tables as the nsys user guide's SQLite schema lists them), written in nsys's multi-line DDL
//! style (§2.4).

/// nsys version the writer emulates.
pub const PRODUCT_VERSION: &str = "2026.2.1.210";
/// Export schema version the writer emulates.
pub const SCHEMA_VERSION: (u32, u32, u32) = (3, 25, 0);

/// Every non-ENUM table: `name`, then `column TYPE [NN] [PK]` entries separated by commas.
pub const TABLES: &[(&str, &str)] = &[
    ("StringIds", "id INTEGER NN PK, value TEXT NN"),
    (
        "ThreadNames",
        "nameId INTEGER NN, priority INTEGER, globalTid INTEGER",
    ),
    ("PROCESSES", "globalPid INTEGER, pid INTEGER, name TEXT"),
    ("META_DATA_EXPORT", "name TEXT NN, value TEXT"),
    ("META_DATA_CAPTURE", "name TEXT NN, value TEXT"),
    (
        "TARGET_INFO_SESSION_START_TIME",
        "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER",
    ),
    (
        "TARGET_INFO_SYSTEM_ENV",
        "globalVid INTEGER, devStateName TEXT NN, name TEXT NN, nameEnum INTEGER NN, value TEXT NN",
    ),
    (
        "ANALYSIS_DETAILS",
        "globalVid INTEGER NN, duration INTEGER NN, startTime INTEGER NN, stopTime INTEGER NN",
    ),
    (
        "TARGET_INFO_GPU",
        "vmId INTEGER NN, id INTEGER NN, name TEXT, busLocation TEXT, isDiscrete INTEGER, \
         l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, \
         smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, \
         cuDevice INTEGER, ctxswDevPath TEXT, ctrlDevPath TEXT, revision INTEGER, \
         nodeMask INTEGER, constantMemory INTEGER, maxIPC INTEGER, maxRegistersPerBlock INTEGER, \
         maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER, \
         maxRegistersPerSm INTEGER, threadsPerWarp INTEGER, asyncEngines INTEGER, \
         maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER, \
         maxBlockDimX INTEGER, maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX INTEGER, \
         maxGridDimY INTEGER, maxGridDimZ INTEGER, computeMajor INTEGER, computeMinor INTEGER, \
         smMajor INTEGER, smMinor INTEGER",
    ),
    (
        "TARGET_INFO_CUDA_DEVICE",
        "gpuId INTEGER, cudaId INTEGER NN, pid INTEGER NN, uuid TEXT, numMultiprocessors INTEGER",
    ),
    (
        "TARGET_INFO_CUDA_CONTEXT_INFO",
        "nullStreamId INTEGER NN, hwId INTEGER NN, vmId INTEGER NN, processId INTEGER NN, \
         deviceId INTEGER NN, contextId INTEGER NN, parentContextId INTEGER, \
         isGreenContext INTEGER, numMultiprocessors INTEGER",
    ),
    (
        "TARGET_INFO_CUDA_STREAM",
        "streamId INTEGER NN, hwId INTEGER NN, vmId INTEGER NN, processId INTEGER NN, \
         contextId INTEGER NN, priority INTEGER NN, flag INTEGER NN",
    ),
    (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "start INTEGER NN, end INTEGER NN, deviceId INTEGER NN, contextId INTEGER NN, \
         greenContextId INTEGER, streamId INTEGER NN, correlationId INTEGER, globalPid INTEGER, \
         demangledName INTEGER NN, shortName INTEGER NN, mangledName INTEGER, \
         launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NN, \
         gridX INTEGER NN, gridY INTEGER NN, gridZ INTEGER NN, blockX INTEGER NN, \
         blockY INTEGER NN, blockZ INTEGER NN, staticSharedMemory INTEGER NN, \
         dynamicSharedMemory INTEGER NN, localMemoryPerThread INTEGER NN, \
         localMemoryTotal INTEGER NN, gridId INTEGER NN, sharedMemoryExecuted INTEGER, \
         graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER, qmdBulkReleaseDone INTEGER, \
         qmdPreexitDone INTEGER, qmdLastCtaDone INTEGER, graphId INTEGER, clusterX INTEGER, \
         clusterY INTEGER, clusterZ INTEGER, clusterSchedulingPolicy INTEGER, \
         maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER, \
         sharedMemoryRequestedPercentage INTEGER, tensorSizeMinusOneElements TEXT NN",
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "start INTEGER NN, end INTEGER NN, deviceId INTEGER NN, contextId INTEGER NN, \
         greenContextId INTEGER, streamId INTEGER NN, correlationId INTEGER, globalPid INTEGER, \
         bytes INTEGER NN, copyKind INTEGER NN, deprecatedSrcId INTEGER, srcKind INTEGER, \
         dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, \
         dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, \
         virtualAddress INTEGER, copyCount INTEGER",
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "start INTEGER NN, end INTEGER NN, deviceId INTEGER NN, contextId INTEGER NN, \
         greenContextId INTEGER, streamId INTEGER NN, correlationId INTEGER, globalPid INTEGER, \
         value INTEGER NN, bytes INTEGER NN, graphNodeId INTEGER, memKind INTEGER",
    ),
    (
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "start INTEGER NN, end INTEGER NN, eventClass INTEGER NN, globalTid INTEGER, \
         correlationId INTEGER, nameId INTEGER NN, returnValue INTEGER NN, callchainId INTEGER",
    ),
    (
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        "start INTEGER NN, end INTEGER NN, deviceId INTEGER NN, contextId INTEGER NN, \
         greenContextId INTEGER, streamId INTEGER NN, correlationId INTEGER, globalPid INTEGER, \
         graphId INTEGER NN, graphExecId INTEGER NN",
    ),
    (
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "start INTEGER NN, end INTEGER NN, deviceId INTEGER NN, contextId INTEGER NN, \
         greenContextId INTEGER, streamId INTEGER NN, correlationId INTEGER, globalPid INTEGER, \
         deprecatedSyncType INTEGER, syncType INTEGER NN, eventId INTEGER NN, \
         eventSyncId INTEGER",
    ),
    (
        "TARGET_INFO_GPU_METRICS",
        "typeId INTEGER NN, sourceId INTEGER NN, typeName TEXT NN, metricId INTEGER NN, \
         metricName TEXT NN",
    ),
    (
        "GPU_METRICS",
        "rawTimestamp INTEGER NN, timestamp INTEGER NN, typeId INTEGER NN, \
         metricId INTEGER NN, value INTEGER NN",
    ),
    (
        "CUDA_GPU_MEMORY_USAGE_EVENTS",
        "start INTEGER NN, globalPid INTEGER NN, deviceId INTEGER NN, contextId INTEGER NN, \
         address INTEGER NN, pc INTEGER NN, bytes INTEGER NN, memKind INTEGER NN, \
         memoryOperationType INTEGER NN, name TEXT, correlationId INTEGER, streamId INTEGER, \
         localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER, \
         localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER, \
         importedMemoryPoolAddress INTEGER, importedMemoryPoolProcessId INTEGER",
    ),
    (
        "OSRT_API",
        "start INTEGER NN, end INTEGER NN, eventClass INTEGER NN, globalTid INTEGER, \
         nameId INTEGER NN, returnValue INTEGER NN, nestingLevel INTEGER, \
         callchainId INTEGER NN, argumentsId INTEGER NN",
    ),
    ("MPI_RANKS", "globalTid INTEGER NN, rank INTEGER NN"),
    (
        "CUPTI_ACTIVITY_KIND_OPENACC_DATA",
        "start INTEGER NN, end INTEGER NN, nameId INTEGER NN, globalTid INTEGER, \
         eventKind INTEGER NN, DeviceType INTEGER NN, lineNo INTEGER NN, cuDeviceId INTEGER NN, \
         cuContextId INTEGER NN, cuStreamId INTEGER NN, srcFile INTEGER, funcName INTEGER, \
         bytes INTEGER, varName INTEGER",
    ),
    (
        "CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH",
        "start INTEGER NN, end INTEGER NN, nameId INTEGER NN, globalTid INTEGER, \
         eventKind INTEGER NN, DeviceType INTEGER NN, lineNo INTEGER NN, cuDeviceId INTEGER NN, \
         cuContextId INTEGER NN, cuStreamId INTEGER NN, srcFile INTEGER, funcName INTEGER, \
         numGangs INTEGER, numWorkers INTEGER, vectorLength INTEGER, kernelName INTEGER",
    ),
    (
        "CUPTI_ACTIVITY_KIND_OPENACC_OTHER",
        "start INTEGER NN, end INTEGER NN, nameId INTEGER NN, globalTid INTEGER, \
         eventKind INTEGER NN, DeviceType INTEGER NN, lineNo INTEGER NN, cuDeviceId INTEGER NN, \
         cuContextId INTEGER NN, cuStreamId INTEGER NN, srcFile INTEGER, funcName INTEGER",
    ),
    (
        "MPI_P2P_EVENTS",
        "start INTEGER NN, end INTEGER, globalTid INTEGER, textId INTEGER, commHandle INTEGER, \
         commUid INTEGER, tag INTEGER, remoteRank INTEGER, size INTEGER, requestHandle INTEGER",
    ),
    (
        "MPI_COLLECTIVES_EVENTS",
        "start INTEGER NN, end INTEGER, globalTid INTEGER, textId INTEGER, commHandle INTEGER, \
         commUid INTEGER, rootRank INTEGER, size INTEGER, recvSize INTEGER, \
         requestHandle INTEGER",
    ),
    (
        "MPI_START_WAIT_EVENTS",
        "start INTEGER NN, end INTEGER, globalTid INTEGER, textId INTEGER, requestHandle INTEGER",
    ),
    (
        "MPI_OTHER_EVENTS",
        "start INTEGER NN, end INTEGER, globalTid INTEGER, textId INTEGER",
    ),
    (
        "NVTX_EVENTS",
        "start INTEGER NN, end INTEGER, eventType INTEGER NN, rangeId INTEGER, category INTEGER, \
         color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, \
         domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, \
         uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, \
         jsonText TEXT, binaryData TEXT",
    ),
];

/// The ENUM tables a synthetic export holds and their rows (Appendix C): a line with the table
/// name, then `id<TAB>name<TAB>label` lines.
pub const ENUMS: &str = include_str!("enums.tsv");

/// One declared column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Name.
    pub name: &'static str,
    /// Declared type (`INTEGER`, `TEXT` or `REAL`).
    pub ty: &'static str,
    /// Declared NOT NULL.
    pub not_null: bool,
    /// Part of the primary key.
    pub primary_key: bool,
}

/// The columns of a spec string.
pub fn columns(spec: &'static str) -> Vec<ColumnSpec> {
    spec.split(',')
        .map(|entry| {
            let mut words = entry.split_whitespace();
            let name = words.next().unwrap_or_default();
            let ty = words.next().unwrap_or_default();
            let flags: Vec<&str> = words.collect();
            ColumnSpec {
                name,
                ty,
                not_null: flags.contains(&"NN"),
                primary_key: flags.contains(&"PK"),
            }
        })
        .collect()
}

/// `CREATE TABLE` text in nsys's style: one column per line, name padded to 28, type to 10.
pub fn create_table(name: &str, columns: &[ColumnSpec]) -> String {
    let pk: Vec<&str> = columns
        .iter()
        .filter(|c| c.primary_key)
        .map(|c| c.name)
        .collect();
    let lines: Vec<String> = columns
        .iter()
        .map(|c| {
            let mut flags = String::new();
            if c.not_null {
                flags.push_str("NOT NULL");
            }
            if c.primary_key && pk.len() == 1 {
                flags.push_str(" PRIMARY KEY");
            }
            // Names longer than the 28-column pad still get one space before the type.
            let name = format!("{:<27} ", c.name);
            format!("    {name}{:<10}{}", c.ty, flags.trim_start())
                .trim_end()
                .to_string()
        })
        .collect();
    let mut ddl = format!("CREATE TABLE {name} (\n{}", lines.join(",\n"));
    if pk.len() > 1 {
        ddl.push_str(&format!(",\n    PRIMARY KEY ({})", pk.join(", ")));
    }
    ddl.push_str("\n);");
    ddl
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parses_flags() {
        let cols = columns("id INTEGER NN PK, value TEXT NN, extra REAL");
        assert_eq!(cols.len(), 3);
        assert!(cols[0].not_null && cols[0].primary_key);
        assert!(cols[1].not_null && !cols[1].primary_key);
        assert_eq!(
            (cols[2].name, cols[2].ty, cols[2].not_null),
            ("extra", "REAL", false)
        );
        let ddl = create_table("StringIds", &cols[..2]);
        assert!(ddl.contains("    id                          INTEGER   NOT NULL PRIMARY KEY,"));
    }
}
