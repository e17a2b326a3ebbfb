//! Compiles the vendored proto subsets into Rust with prost: Perfetto's trace
//! (`proto/perfetto/trace.proto`, written) and the JAX/XLA profiler's XSpace
//! (`proto/xplane/xplane.proto`, read). protox parses the .proto in pure Rust, so no system
//! `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/perfetto/trace.proto", "proto/xplane/xplane.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(protos, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
